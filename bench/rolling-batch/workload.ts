import { quantile } from '../harness/figures.js';
import {
  type GenerationJob,
  type GenerationOutput,
  SeededSource,
  randomWorkload,
} from '@kiln/batching';

export interface BenchWorkload {
  readonly requests: readonly GenerationJob[];
  /** Arrival time of each request, ms after the start. */
  readonly arrivalsMs: readonly number[];
}

export interface WorkloadSettings {
  readonly requests: number;
  readonly vocab: number;
  readonly promptMin: number;
  readonly promptMax: number;
  readonly outputMin: number;
  readonly outputMax: number;
  /** Mean gap between arrivals (a Poisson process). */
  readonly meanGapMs: number;
  readonly seed: number;
  /** Draws a prompt of `length` tokens (e.g. from a model's training text); random tokens otherwise. */
  readonly prompt?: (pick: (bound: number) => number, length: number) => number[];
}

export function makeWorkload(s: WorkloadSettings): BenchWorkload {
  const random = new SeededSource(s.seed);
  const { prompt } = s;
  const requests: GenerationJob[] = prompt
    ? Array.from({ length: s.requests }, () => ({
        promptTokens: prompt(
          (bound) => random.int(bound),
          random.between(s.promptMin, s.promptMax),
        ),
        maxNewTokens: random.between(s.outputMin, s.outputMax),
        ignoreEos: true,
      }))
    : randomWorkload(random, {
        count: s.requests,
        vocab: s.vocab,
        minPrompt: s.promptMin,
        maxPrompt: s.promptMax,
        minOutput: s.outputMin,
        maxOutput: s.outputMax,
      }).map((job) => ({ ...job, ignoreEos: true }));
  let at = 0;
  const arrivalsMs = requests.map((_, i) =>
    i === 0 ? 0 : (at += random.exponential(s.meanGapMs)),
  );
  return { requests, arrivalsMs };
}

/** What a run measures of each answer. */
export type GenerationFigures = Pick<
  GenerationOutput,
  'tokens' | 'timeToFirstTokenMs' | 'interTokenMs'
>;

export interface Generator {
  generate(job: GenerationJob): Promise<GenerationFigures>;
}

export interface RunFigures {
  readonly tokens: number;
  readonly wallMs: number;
  readonly tokensPerS: number;
  readonly ttftP50Ms: number;
  readonly interTokenP50Ms: number;
  readonly interTokenP99Ms: number;
  /** Each request's tokens, to check that every contender generated the same. */
  readonly outputs: readonly (readonly number[])[];
}

/** Sends the requests at their arrival times; measures from the first arrival to the last answer. */
export async function runWorkload(
  generator: Generator,
  workload: BenchWorkload,
): Promise<RunFigures> {
  const start = performance.now();
  const results = await Promise.all(
    workload.requests.map(async (request, i) => {
      const wait = workload.arrivalsMs[i]! - (performance.now() - start);
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      return generator.generate(request);
    }),
  );
  const wallMs = performance.now() - start;
  const tokens = results.reduce((n, r) => n + r.tokens.length, 0);
  const gaps = results.flatMap((r) => r.interTokenMs);
  return {
    tokens,
    wallMs,
    tokensPerS: (tokens / wallMs) * 1000,
    ttftP50Ms: quantile(
      results.map((r) => r.timeToFirstTokenMs ?? Infinity),
      0.5,
    ),
    interTokenP50Ms: quantile(gaps, 0.5),
    interTokenP99Ms: quantile(gaps, 0.99),
    outputs: results.map((r) => r.tokens),
  };
}
