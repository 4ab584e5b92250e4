import { KilnError, KilnErrorCode } from '../errors.js';
import { maskAllows } from './response-format.js';

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
 *
 * Sampling walks the candidates from the most likely down (ties: lower token id first) as
 * far as top-p and the draw need, from a heap, instead of sorting the vocabulary; it chooses
 * the token a full sort would, rounding included (see `draw`).
 */
export class TokenSampler {
  private state: number;

  constructor(private readonly params: SamplingParams = {}) {
    checkSamplingParams(params);
    this.state = (params.seed ?? Math.floor(Math.random() * 2 ** 32)) >>> 0;
  }

  /**
   * The next token given the logits of the last position and every token seen so far; with
   * `allowed` (a bitmask: token t when bit t % 32 of word t >> 5 is set, as a response
   * format's grammar gives it), only among those tokens.
   */
  next(logits: Float32Array, history: readonly number[], allowed?: Int32Array): number {
    // Greedy, with no penalty or grammar to reshape the scores: the logits' own argmax, read in
    // place (a copy of a 32k-vocabulary row is 256 kB a token to write and collect).
    if (!allowed && !this.params.doSample && (this.params.repetitionPenalty ?? 1) === 1)
      return argmax(logits);
    const scores = this.penalised(logits, history);
    if (allowed) {
      let any = false;
      for (let t = 0; t < scores.length; t++) {
        if (!maskAllows(allowed, t)) scores[t] = -Infinity;
        else any = true;
      }
      if (!any) throw new KilnError(KilnErrorCode.Internal, 'no token may come next');
    }
    return this.choose(scores);
  }

  /**
   * The next token and its log-probability: the log-softmax of the logits after the
   * repetition penalty, at temperature 1 (the model's own distribution, before temperature,
   * top-k and top-p reshape it), so it does not depend on how the token was chosen.
   */
  nextWithLogprob(
    logits: Float32Array,
    history: readonly number[],
  ): { token: number; logprob: number } {
    const scores = this.penalised(logits, history);
    const token = this.choose(scores);
    return { token, logprob: logSoftmaxAt(scores, token) };
  }

  private penalised(logits: Float32Array, history: readonly number[]): Float64Array {
    const scores = Float64Array.from(logits);
    const penalty = this.params.repetitionPenalty ?? 1;
    if (penalty !== 1) {
      for (const token of new Set(history)) {
        const s = scores[token]!;
        scores[token] = s > 0 ? s / penalty : s * penalty;
      }
    }
    return scores;
  }

  private choose(scores: Float64Array): number {
    if (!this.params.doSample) return argmax(scores);
    const temperature = this.params.temperature ?? 1;
    const topK = this.params.topK ?? 0;
    const limited = topK > 0 && topK < scores.length;
    const candidates = limited ? firstRanked(scores, topK) : tokenRange(scores.length);
    const top = scores[argmax(scores)]!;
    const weight = (t: number) => Math.exp((scores[t]! - top) / temperature);
    let total = 0;
    for (const t of candidates) total += weight(t);
    const walk = { scores, candidates, weight, topP: this.params.topP ?? 1, u: this.random() };
    // The top k come in rank order, so theirs is the full sort's sum; the whole vocabulary's
    // is in index order, and when a decision falls within its rounding, the rank-order sum
    // (a sort, about never) decides.
    return draw(walk, total, limited) ?? draw(walk, rankedSum(scores, candidates, weight), true)!;
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

interface Walk {
  readonly scores: Float64Array;
  /** Tokens that may be chosen (the top k, or all), in any order. */
  readonly candidates: Int32Array;
  readonly weight: (token: number) => number;
  readonly topP: number;
  /** The draw, uniform in [0, 1). */
  readonly u: number;
}

const UNIT_ROUNDOFF = 2 ** -53;

/**
 * The token a full sort's sampling picks: candidates in rank order, the top-p prefix by
 * cumulative `weight / total`, then the draw `u × kept` walked down by subtraction. The
 * same floating-point operations in the same order, except that `total` is the candidates'
 * sum in another order when not `exact`: then it is off by at most about 2n roundings, so
 * the masses and the draw's remainder are off by at most `margin`, and a decision that
 * close to its boundary answers undefined.
 */
function draw(walk: Walk, total: number, exact: boolean): number | undefined {
  const { candidates, weight, topP } = walk;
  const heap = new TokenHeap(candidates.slice(), rankedBefore(walk.scores));
  const margin = (steps: number) =>
    exact ? 0 : (4 * candidates.length + 4 * steps + 8) * UNIT_ROUNDOFF;
  if (topP >= 1) {
    // The draw over every candidate: `total` is what it walks down.
    let u = walk.u * total;
    for (let steps = 1; heap.size > 0; steps++) {
      const token = heap.pop();
      const before = u;
      u -= weight(token);
      const near = margin(steps) * total;
      if (u < 0) return u < -near && before >= near ? token : undefined;
      if (heap.size === 0) return exact ? token : undefined;
    }
    return undefined;
  }
  // The top-p prefix, then the draw over it: the prefix's own sum is in rank order.
  const kept: number[] = [];
  const weights: number[] = [];
  let mass = 0;
  while (heap.size > 0) {
    const token = heap.pop();
    const w = weight(token);
    kept.push(token);
    weights.push(w);
    const before = mass;
    mass += w / total;
    if (mass >= topP) {
      const near = margin(kept.length);
      if (mass < topP + near || before >= topP - near) return undefined;
      break;
    }
  }
  if (mass < topP && !exact) return undefined;
  let u = walk.u * weights.reduce((a, b) => a + b, 0);
  for (let i = 0; i < kept.length; i++) {
    u -= weights[i]!;
    if (u < 0) return kept[i]!;
  }
  return kept[kept.length - 1]!;
}

/** Whether token a ranks before b: a higher score, or the same score and a lower id. */
function rankedBefore(scores: Float64Array): (a: number, b: number) => boolean {
  return (a, b) => scores[a]! > scores[b]! || (scores[a] === scores[b] && a < b);
}

/** The k tokens ranked first, in rank order. */
function firstRanked(scores: Float64Array, k: number): Int32Array {
  const heap = new TokenHeap(tokenRange(scores.length), rankedBefore(scores));
  return Int32Array.from({ length: k }, () => heap.pop());
}

/** The candidates' weights summed in rank order, as a full sort sums them. */
function rankedSum(
  scores: Float64Array,
  candidates: Int32Array,
  weight: (token: number) => number,
): number {
  const order = Array.from(candidates).sort((a, b) => scores[b]! - scores[a]! || a - b);
  return order.reduce((sum, t) => sum + weight(t), 0);
}

function tokenRange(n: number): Int32Array {
  const ids = new Int32Array(n);
  for (let i = 0; i < n; i++) ids[i] = i;
  return ids;
}

/** A binary heap of token ids; `before(a, b)` when a comes out first. */
class TokenHeap {
  size: number;

  constructor(
    /** Taken over and reordered in place. */
    private readonly ids: Int32Array,
    private readonly before: (a: number, b: number) => boolean,
  ) {
    this.size = ids.length;
    for (let i = (this.size >> 1) - 1; i >= 0; i--) this.siftDown(i);
  }

  pop(): number {
    const top = this.ids[0]!;
    this.ids[0] = this.ids[--this.size]!;
    this.siftDown(0);
    return top;
  }

  private siftDown(from: number): void {
    const { ids, size, before } = this;
    const id = ids[from]!;
    let i = from;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= size) break;
      if (child + 1 < size && before(ids[child + 1]!, ids[child]!)) child++;
      if (!before(ids[child]!, id)) break;
      ids[i] = ids[child]!;
      i = child;
    }
    ids[i] = id;
  }
}

/** Index of the largest score; the lowest index wins a tie. */
export function argmax(scores: ArrayLike<number>): number {
  // The best value kept in a local: reading it back from the array each time costs twice as much.
  let best = 0;
  let top = scores[0]!;
  for (let i = 1; i < scores.length; i++) {
    const score = scores[i]!;
    if (score > top) {
      top = score;
      best = i;
    }
  }
  return best;
}

/** log softmax(scores)[token], in one pass for the maximum and one for the sum. */
export function logSoftmaxAt(scores: ArrayLike<number>, token: number): number {
  const top = scores[argmax(scores)]!;
  let sum = 0;
  for (let i = 0; i < scores.length; i++) sum += Math.exp(scores[i]! - top);
  return scores[token]! - top - Math.log(sum);
}

/** One of the most likely tokens of a step, with its log-probability. */
export interface TokenLogprob {
  readonly token: number;
  readonly logprob: number;
}

/** The most top log-probabilities a request may ask for (OpenAI's bound). */
export const MAX_TOP_LOGPROBS = 20;

/**
 * The k most likely tokens under log-softmax(scores), most likely first (ties: lower id
 * first). A partial selection: one pass keeps the best k in a small sorted array, so a step
 * costs about the vocabulary's size whatever k, never a sort of it.
 */
export function topLogprobs(scores: ArrayLike<number>, k: number): TokenLogprob[] {
  const n = Math.min(Math.max(0, Math.floor(k)), scores.length);
  if (n === 0) return [];
  const top = scores[argmax(scores)]!;
  let sum = 0;
  for (let i = 0; i < scores.length; i++) sum += Math.exp(scores[i]! - top);
  // As logSoftmaxAt rounds, so that a chosen token's log-probability equals its entry here.
  const logSum = Math.log(sum);
  const best: number[] = [];
  for (let i = 0; i < scores.length; i++) {
    const s = scores[i]!;
    // Only a score above the kth best enters; equal scores keep the lower id in front.
    if (best.length === n) {
      if (!(s > scores[best[n - 1]!]!)) continue;
      best.pop();
    }
    let at = best.length;
    best.push(i);
    for (; at > 0 && s > scores[best[at - 1]!]!; at--) best[at] = best[at - 1]!;
    best[at] = i;
  }
  return best.map((token) => ({ token, logprob: scores[token]! - top - logSum }));
}
