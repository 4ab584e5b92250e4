import type { StepDecoder, StepEntry } from '@kiln/core';

/** One FlatStepDecoder sequence: a hash of every token it was fed. */
export interface FlatStepState {
  hash: number;
  released: boolean;
}

/**
 * A stand-in for a model on an accelerator with room to spare: every step takes `stepMs`
 * whatever it holds (one sequence or the batch limit, a decode token or a prompt), and the
 * thread stays free meanwhile, as while a GPU works. It chooses each next token itself, from
 * a hash of everything its sequence was fed, so a scheduling mistake changes the output and
 * no sampling cost blurs the scheduler's.
 */
export class FlatStepDecoder implements StepDecoder<FlatStepState> {
  readonly cacheBytesPerToken = 1;
  steps = 0;
  /** Sequences fed, over all steps. */
  rows = 0;
  /** Time the steps took, start to answer: `stepMs` each, unless the machine runs late. */
  busyMs = 0;

  constructor(
    readonly stepMs: number,
    readonly vocabSize = 1000,
    readonly maxSequenceLength = 4096,
  ) {}

  open(): FlatStepState {
    return { hash: 2166136261, released: false };
  }

  async step(entries: readonly StepEntry<FlatStepState>[]): Promise<readonly number[]> {
    const started = performance.now();
    this.steps++;
    this.rows += entries.length;
    const tokens = entries.map(({ state, tokens }) => {
      if (state.released) throw new Error('a released sequence was fed');
      for (const t of tokens) state.hash = Math.imul(state.hash ^ t, 16777619) >>> 0;
      return state.hash % this.vocabSize;
    });
    await waitUntil(started + this.stepMs);
    this.busyMs += performance.now() - started;
    return tokens;
  }

  release(state: FlatStepState): void {
    state.released = true;
  }
}

/**
 * Resolves at `deadline` (performance.now() ms), not a timer's millisecond or more after it:
 * a timer brings it within 2 ms, then the event loop is polled (timers and I/O still run).
 */
async function waitUntil(deadline: number): Promise<void> {
  const coarse = deadline - performance.now() - 2;
  if (coarse > 0) await new Promise((resolve) => setTimeout(resolve, coarse));
  while (performance.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
}
