import type { StepDecoder, StepEntry } from '@kiln/core';
import type { DecoderSequence, OrtStepDecoder } from '@kiln/engine-onnxruntime';

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

/** An OrtStepDecoder that adds up each step's timings, so a bench can say where time went. */
export class StepCounter implements StepDecoder<DecoderSequence> {
  totals: StepTotals = emptyTotals();

  constructor(private readonly decoder: OrtStepDecoder) {}

  get vocabSize(): number {
    return this.decoder.vocabSize;
  }
  get maxSequenceLength(): number {
    return this.decoder.maxSequenceLength;
  }
  get cacheBytesPerToken(): number {
    return this.decoder.cacheBytesPerToken;
  }
  open(): DecoderSequence {
    return this.decoder.open();
  }
  release(state: DecoderSequence): void {
    this.decoder.release(state);
  }

  async step(entries: readonly StepEntry<DecoderSequence>[]): Promise<readonly Float32Array[]> {
    const logits = await this.decoder.step(entries);
    const t = this.totals;
    t.stepMs += this.decoder.lastStepMs;
    t.ortMs += this.decoder.lastSessionMs;
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
