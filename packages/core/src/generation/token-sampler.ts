import { KilnError, KilnErrorCode } from '../errors.js';

/** How the next token is chosen from the logits (Hugging Face / DJL LMI parameter names). */
export interface SamplingParams {
  /** Sample from the distribution; otherwise take the most likely token (greedy). */
  readonly doSample?: boolean;
  /** Divides the logits before sampling; default 1. */
  readonly temperature?: number;
  /** Keep only the k most likely tokens; 0 or unset keeps all. */
  readonly topK?: number;
  /** Keep the smallest set of tokens whose probability reaches p; 1 or unset keeps all. */
  readonly topP?: number;
  /** > 1 makes tokens already in the prompt or output less likely (CTRL's rule); default 1. */
  readonly repetitionPenalty?: number;
  /** Seeds this request's own random source, so its samples do not depend on its batch. */
  readonly seed?: number;
}

/** Checks sampling parameters; throws INVALID_INPUT naming the first bad one. */
export function checkSamplingParams(params: SamplingParams): void {
  const bad = (name: string, rule: string) =>
    new KilnError(KilnErrorCode.InvalidInput, `${name} must be ${rule}`);
  const { temperature, topK, topP, repetitionPenalty, seed } = params;
  if (temperature !== undefined && !(Number.isFinite(temperature) && temperature > 0))
    throw bad('temperature', 'a number > 0');
  if (topK !== undefined && !(Number.isInteger(topK) && topK >= 0))
    throw bad('top_k', 'an integer >= 0');
  if (topP !== undefined && !(Number.isFinite(topP) && topP > 0 && topP <= 1))
    throw bad('top_p', 'a number in (0, 1]');
  if (
    repetitionPenalty !== undefined &&
    !(Number.isFinite(repetitionPenalty) && repetitionPenalty > 0)
  )
    throw bad('repetition_penalty', 'a number > 0');
  if (seed !== undefined && !(Number.isInteger(seed) && seed >= 0))
    throw bad('seed', 'an integer >= 0');
}

/**
 * Chooses tokens for one sequence. Each sampler owns its random source (mulberry32 seeded
 * from `seed`), so a request's samples depend only on its own logits and seed.
 */
export class TokenSampler {
  private state: number;

  constructor(private readonly params: SamplingParams = {}) {
    checkSamplingParams(params);
    this.state = (params.seed ?? Math.floor(Math.random() * 2 ** 32)) >>> 0;
  }

  /** The next token given the logits of the last position and every token seen so far. */
  next(logits: Float32Array, history: readonly number[]): number {
    const scores = Float64Array.from(logits);
    const penalty = this.params.repetitionPenalty ?? 1;
    if (penalty !== 1) {
      for (const token of new Set(history)) {
        const s = scores[token]!;
        scores[token] = s > 0 ? s / penalty : s * penalty;
      }
    }
    if (!this.params.doSample) return argmax(scores);
    return this.sample(scores);
  }

  private sample(scores: Float64Array): number {
    const temperature = this.params.temperature ?? 1;
    // Candidates in descending score order; ties keep the lower token id first.
    let order = Array.from(scores.keys()).sort((a, b) => scores[b]! - scores[a]! || a - b);
    const topK = this.params.topK ?? 0;
    if (topK > 0 && topK < order.length) order = order.slice(0, topK);
    const top = scores[order[0]!]!;
    const weights = order.map((t) => Math.exp((scores[t]! - top) / temperature));
    const total = weights.reduce((a, b) => a + b, 0);
    const topP = this.params.topP ?? 1;
    let keep = order.length;
    if (topP < 1) {
      let mass = 0;
      for (let i = 0; i < order.length; i++) {
        mass += weights[i]! / total;
        if (mass >= topP) {
          keep = i + 1;
          break;
        }
      }
    }
    const kept = weights.slice(0, keep).reduce((a, b) => a + b, 0);
    let u = this.random() * kept;
    for (let i = 0; i < keep; i++) {
      u -= weights[i]!;
      if (u < 0) return order[i]!;
    }
    return order[keep - 1]!;
  }

  /** Uniform in [0, 1) (mulberry32). */
  private random(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}

/** Index of the largest score; the lowest index wins a tie. */
export function argmax(scores: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < scores.length; i++) if (scores[i]! > scores[best]!) best = i;
  return best;
}
