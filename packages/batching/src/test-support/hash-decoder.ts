import type { StepDecoder, StepEntry } from '@kiln/core';

/** State of one HashDecoder sequence: every token it was fed. */
export interface HashState {
  readonly seen: number[];
  released: boolean;
}

/**
 * A model stand-in whose logits are a hash of everything a sequence was fed, so that any
 * scheduling mistake (a token fed twice, out of order, or to the wrong sequence) changes the
 * output. It records each step's shape for the tests to check.
 */
export class HashDecoder implements StepDecoder<HashState> {
  readonly cacheBytesPerToken = 8;
  readonly steps: {
    sequences: number;
    tokens: number;
    prefillTokens: number;
    /** Each entry's run, its tokens and the positions its sequence had seen before. */
    entries: { run: number | undefined; tokens: number; past: number }[];
  }[] = [];
  openCount = 0;
  /** What it tells the scheduler a decode run costs; none: one run a step. */
  decodeRunCost: number | undefined;

  constructor(
    readonly vocabSize = 50,
    readonly maxSequenceLength = 1024,
  ) {}

  open(): HashState {
    this.openCount++;
    return { seen: [], released: false };
  }

  async step(entries: readonly StepEntry<HashState>[]): Promise<readonly Float32Array[]> {
    if (new Set(entries.map((e) => e.state)).size !== entries.length)
      throw new Error('a state was fed twice in one step');
    this.steps.push({
      sequences: entries.length,
      tokens: entries.reduce((n, e) => n + e.tokens.length, 0),
      prefillTokens: entries.reduce((n, e) => n + (e.tokens.length > 1 ? e.tokens.length : 0), 0),
      entries: entries.map((e) => ({
        run: e.run,
        tokens: e.tokens.length,
        past: e.state.seen.length,
      })),
    });
    await new Promise((resolve) => setImmediate(resolve));
    return entries.map(({ state, tokens }) => {
      if (state.released) throw new Error('a released state was fed');
      state.seen.push(...tokens);
      return this.logits(state.seen);
    });
  }

  release(state: HashState): void {
    state.released = true;
    this.openCount--;
  }

  private logits(seen: readonly number[]): Float32Array {
    let h = 2166136261;
    for (const t of seen) h = Math.imul(h ^ t, 16777619) >>> 0;
    const out = new Float32Array(this.vocabSize);
    for (let i = 0; i < out.length; i++) {
      h = Math.imul(h ^ (i + 1), 2246822519) >>> 0;
      out[i] = (h % 1000) / 100;
    }
    return out;
  }
}
