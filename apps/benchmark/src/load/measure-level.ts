import { KilnError, KilnErrorCode } from '@kiln/core';
import { LatencyHistogram, type LatencySummary } from '../stats/latency-histogram.js';
import {
  DEFAULT_STABILITY,
  type StabilityRule,
  type WindowSample,
  isStable,
} from '../stats/stability.js';
import { WindowRecorder } from './window-recorder.js';

/** Sends one request; resolves when it succeeded, rejects when it failed. */
export type Send = () => Promise<void>;

export interface MeasureOptions {
  /** Length of one measurement window, ms. */
  readonly windowMs: number;
  /** Windows tried before a level is given up as unstable. */
  readonly maxWindows: number;
  readonly stability?: StabilityRule;
  /** Runs before each window opens (load keeps running), e.g. to scrape server metrics. */
  readonly beforeWindow?: (index: number) => Promise<void> | void;
  /** Reports each finished window (progress). */
  readonly onWindow?: (index: number, sample: WindowSample) => void;
}

/** One load level measured until stable (or out of windows). */
export interface LevelMeasurement {
  /** Concurrency, or requests per second for a rate level. */
  readonly level: number;
  /** Completed requests per second over the counted windows. */
  readonly throughput: number;
  /** Requests completed in the counted windows. */
  readonly requests: number;
  /** Requests that failed in the counted windows. */
  readonly errors: number;
  readonly latency: LatencySummary;
  /** Whether the counted windows met the stability rule. */
  readonly stable: boolean;
  /** Windows run in all. */
  readonly windows: number;
  /** Index of the first counted window (the last `stability.windows` ones). */
  readonly firstCountedWindow: number;
  readonly samples: readonly WindowSample[];
  readonly firstError: string | undefined;
}

/** Clients that can issue requests for a level until told to stop. */
interface LoadDriver {
  stop(): Promise<void>;
}

/**
 * Closed loop: `concurrency` clients each send a request, wait for its answer, and send the
 * next (perf_analyzer's concurrency mode). Latency is from send to answer.
 */
export function measureConcurrency(
  send: Send,
  concurrency: number,
  options: MeasureOptions,
): Promise<LevelMeasurement> {
  return measure(concurrency, options, (recorder) => {
    let running = true;
    const client = async () => {
      while (running) {
        const started = performance.now();
        try {
          await send();
          recorder.success(performance.now() - started);
        } catch (error) {
          recorder.failure(error);
          // A request that fails at once must not spin the loop without yielding to timers.
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      }
    };
    const clients = Array.from({ length: concurrency }, client);
    return {
      stop: async () => {
        running = false;
        await Promise.all(clients);
      },
    };
  });
}

/**
 * Open loop: requests start on a fixed schedule, `rate` per second, whether or not earlier
 * ones have been answered (perf_analyzer's request-rate mode). Latency counts from the
 * scheduled start, so a server that falls behind shows it instead of slowing the client.
 * At most `maxOutstanding` requests are in flight; a request that would exceed it fails.
 */
export function measureRate(
  send: Send,
  rate: number,
  options: MeasureOptions & { maxOutstanding: number },
): Promise<LevelMeasurement> {
  return measure(rate, options, (recorder) => {
    const interval = 1000 / rate;
    const start = performance.now();
    const inFlight = new Set<Promise<void>>();
    let scheduled = 0;
    let running = true;
    const tick = () => {
      const now = performance.now();
      while (running && start + scheduled * interval <= now) {
        const due = start + scheduled * interval;
        scheduled++;
        if (inFlight.size >= options.maxOutstanding) {
          recorder.failure(
            new Error(
              `more than ${options.maxOutstanding} requests outstanding: the server cannot keep up with ${rate}/s`,
            ),
          );
          continue;
        }
        const request: Promise<void> = send().then(
          () => recorder.success(performance.now() - due),
          (error: unknown) => recorder.failure(error),
        );
        inFlight.add(request);
        void request.finally(() => inFlight.delete(request));
      }
    };
    const timer = setInterval(tick, Math.max(1, Math.min(10, interval / 2)));
    return {
      stop: async () => {
        running = false;
        clearInterval(timer);
        await Promise.allSettled([...inFlight]);
      },
    };
  });
}

async function measure(
  level: number,
  options: MeasureOptions,
  start: (recorder: WindowRecorder) => LoadDriver,
): Promise<LevelMeasurement> {
  const rule = options.stability ?? DEFAULT_STABILITY;
  const recorder = new WindowRecorder();
  const driver = start(recorder);
  const windows: {
    histogram: LatencyHistogram;
    completed: number;
    errors: number;
    elapsedMs: number;
  }[] = [];
  const samples: WindowSample[] = [];
  try {
    for (let index = 0; index < Math.max(options.maxWindows, rule.windows); index++) {
      await options.beforeWindow?.(index);
      recorder.startWindow();
      await new Promise((resolve) => setTimeout(resolve, options.windowMs));
      const window = recorder.endWindow();
      if (window.completed === 0 && window.errors > 0) {
        throw new KilnError(
          KilnErrorCode.EngineError,
          `every request failed at level ${level}: ${recorder.firstError ?? 'unknown error'}`,
        );
      }
      const sample = {
        throughput: (window.completed * 1000) / window.elapsedMs,
        meanLatencyMs: window.histogram.summary().meanMs,
      };
      windows.push(window);
      samples.push(sample);
      options.onWindow?.(index, sample);
      if (isStable(samples, rule)) break;
    }
  } finally {
    await driver.stop();
  }
  const firstCountedWindow = Math.max(0, windows.length - rule.windows);
  const counted = windows.slice(firstCountedWindow);
  const histogram = new LatencyHistogram();
  for (const w of counted) histogram.add(w.histogram);
  const requests = counted.reduce((sum, w) => sum + w.completed, 0);
  const elapsedMs = counted.reduce((sum, w) => sum + w.elapsedMs, 0);
  return {
    level,
    throughput: elapsedMs > 0 ? (requests * 1000) / elapsedMs : 0,
    requests,
    errors: counted.reduce((sum, w) => sum + w.errors, 0),
    latency: histogram.summary(),
    stable: isStable(samples, rule),
    windows: windows.length,
    firstCountedWindow,
    samples,
    firstError: recorder.firstError,
  };
}
