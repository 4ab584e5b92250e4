import { LatencyHistogram } from '../stats/latency-histogram.js';

/** What happened during one measurement window. */
export interface WindowRecord {
  readonly histogram: LatencyHistogram;
  readonly completed: number;
  readonly errors: number;
  readonly elapsedMs: number;
}

/**
 * Collects outcomes into the current window. Outcomes between windows (while the runner
 * scrapes metrics or checks stability) belong to no window.
 */
export class WindowRecorder {
  private current:
    | { histogram: LatencyHistogram; completed: number; errors: number; startedAt: number }
    | undefined;
  /** The first failure seen, for a message when every request fails. */
  firstError: string | undefined;

  startWindow(): void {
    this.current = {
      histogram: new LatencyHistogram(),
      completed: 0,
      errors: 0,
      startedAt: performance.now(),
    };
  }

  endWindow(): WindowRecord {
    const window = this.current;
    if (!window) throw new Error('no window is open');
    this.current = undefined;
    return {
      histogram: window.histogram,
      completed: window.completed,
      errors: window.errors,
      elapsedMs: performance.now() - window.startedAt,
    };
  }

  success(latencyMs: number): void {
    if (!this.current) return;
    this.current.histogram.record(latencyMs);
    this.current.completed++;
  }

  failure(error: unknown): void {
    this.firstError ??= error instanceof Error ? error.message : String(error);
    if (this.current) this.current.errors++;
  }
}
