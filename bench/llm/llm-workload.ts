// The LLM benches' workload: the options that shape it and the requests they make, so that
// vs-transformers-js.ts and ceiling.ts send the same requests at the same times.
import { type BenchWorkload, makeWorkload } from '../rolling-batch/workload.js';

/** The parseArgs options that shape the workload. */
export const LLM_WORKLOAD_OPTIONS = {
  requests: { type: 'string', default: '64' },
  /** At most this many requests in flight (a closed-loop client). */
  concurrency: { type: 'string', default: '16' },
  /** Mean gap between arrivals (a Poisson process). */
  'gap-ms': { type: 'string', default: '15' },
  'prompt-min': { type: 'string', default: '8' },
  'prompt-max': { type: 'string', default: '64' },
  'output-min': { type: 'string', default: '8' },
  'output-max': { type: 'string', default: '256' },
  /** ONNX Runtime intra-op threads, the same for every contender. */
  threads: { type: 'string', default: '2' },
} as const;

export interface LlmWorkloadValues {
  readonly requests: string;
  readonly 'gap-ms': string;
  readonly 'prompt-min': string;
  readonly 'prompt-max': string;
  readonly 'output-min': string;
  readonly 'output-max': string;
}

/** The workload the options ask for (seed 7); `prompt` draws each prompt's tokens. */
export function llmWorkload(
  values: LlmWorkloadValues,
  vocab: number,
  prompt?: (pick: (bound: number) => number, length: number) => number[],
): BenchWorkload {
  return makeWorkload({
    requests: Number(values.requests),
    vocab,
    promptMin: Number(values['prompt-min']),
    promptMax: Number(values['prompt-max']),
    outputMin: Number(values['output-min']),
    outputMax: Number(values['output-max']),
    meanGapMs: Number(values['gap-ms']),
    seed: 7,
    ...(prompt ? { prompt } : {}),
  });
}
