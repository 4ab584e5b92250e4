/**
 * Time as the queue sees it. Injected so that timing rules (deadlines, batch delays) can be
 * tested with a clock the test advances by hand.
 */
export interface Clock {
  /** Milliseconds; only differences matter. */
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The process clock: `performance.now()` and Node's timers. */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};
