import type { SequenceSettings, StepDecoder, StepEntry, StepOutput } from '@kiln/core';

/** Where a run's decode time went, summed over its steps (ms). */
export interface StepTotals {
  steps: number;
  /** Sequences fed, over all steps: rows ÷ steps is the mean batch. */
  rows: number;
  /** ONNX Runtime's runs (steps on this thread only). */
  ortMs: number;
  /** Whole steps where the decoder runs: ORT plus inputs and KV caches (and, on a step worker, sampling). */
  stepMs: number;
  /** A step worker's round trips as its rolling loop saw them: `stepMs` plus messages between threads. */
  tripMs: number;
}

/**
 * A decoder that adds up each step's timings, so a bench can say where time went: an
 * OrtStepDecoder says how long its steps and its ONNX Runtime runs took; a decoder that does
 * not (a Python step handler's) counts its steps and rows.
 */
export class StepCounter<S> implements StepDecoder<S> {
  totals: StepTotals = emptyTotals();

  constructor(
    private readonly decoder: StepDecoder<S> & {
      readonly lastStepMs?: number;
      readonly lastSessionMs?: number;
    },
  ) {}

  get vocabSize(): number {
    return this.decoder.vocabSize;
  }
  get maxSequenceLength(): number {
    return this.decoder.maxSequenceLength;
  }
  get cacheBytesPerToken(): number {
    return this.decoder.cacheBytesPerToken;
  }
  get eosTokenId(): number | undefined {
    return this.decoder.eosTokenId;
  }
  open(sequence?: SequenceSettings): S {
    return this.decoder.open(sequence);
  }
  release(state: S): void {
    this.decoder.release(state);
  }

  async step(entries: readonly StepEntry<S>[]): Promise<readonly StepOutput[]> {
    const logits = await this.decoder.step(entries);
    const t = this.totals;
    t.stepMs += this.decoder.lastStepMs ?? 0;
    t.ortMs += this.decoder.lastSessionMs ?? 0;
    t.steps++;
    t.rows += entries.length;
    return logits;
  }

  /** The totals so far, and zero for the next run. */
  take(): StepTotals {
    const totals = this.totals;
    this.totals = emptyTotals();
    return totals;
  }
}

function emptyTotals(): StepTotals {
  return { steps: 0, rows: 0, ortMs: 0, stepMs: 0, tripMs: 0 };
}
