import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import { Gauge } from './prom-client-parts.js';

/** How often the loop is sampled: each sample wakes the process, which a busy core feels. */
export const SAMPLE_INTERVAL_MS = 10;

const FIGURES = {
  min: (h: IntervalHistogram) => h.min,
  max: (h: IntervalHistogram) => h.max,
  mean: (h: IntervalHistogram) => h.mean,
  p50: (h: IntervalHistogram) => h.percentile(50),
  p90: (h: IntervalHistogram) => h.percentile(90),
  p99: (h: IntervalHistogram) => h.percentile(99),
} as const;

/**
 * The event loop's delay as `<prefix>nodejs_eventloop_lag_{min,max,mean,stddev,p50,p90,p99}_seconds`
 * (prom-client's names), sampled every 10 ms since the last scrape.
 *
 * Node records the whole time between two samples, so every figure would include the 10 ms
 * interval (prom-client reports ~10 ms on an idle server); the interval is taken off here.
 * Sampling every 1 ms instead reads right too, but wakes the process 1000 times a second,
 * which takes a core from a model's compute threads (ONNX Runtime's, torch's) on a small
 * machine.
 */
export class EventLoopDelayGauges {
  private readonly histogram = monitorEventLoopDelay({ resolution: SAMPLE_INTERVAL_MS });

  constructor(registry: Registry, prefix: string) {
    this.histogram.enable();
    const interval = SAMPLE_INTERVAL_MS * 1e6;
    const gauges = new Map<string, Gauge>();
    const gauge = (figure: string, collect?: () => void) => {
      const made = new Gauge({
        name: `${prefix}nodejs_eventloop_lag_${figure}_seconds`,
        help: `The ${figure} event loop delay since the last scrape, in seconds (sampled every ${SAMPLE_INTERVAL_MS} ms).`,
        registers: [registry],
        // Several ingress processes report the worst one's loop.
        aggregator: 'max',
        ...(collect ? { collect } : {}),
      });
      gauges.set(figure, made);
    };
    // The first gauge sets them all from one reading, then starts a new window.
    gauge('min', () => {
      const h = this.histogram;
      const sampled = h.count > 0;
      for (const [figure, read] of Object.entries(FIGURES)) {
        gauges.get(figure)!.set(sampled ? Math.max(0, read(h) - interval) / 1e9 : 0);
      }
      gauges.get('stddev')!.set(sampled ? h.stddev / 1e9 : 0);
      h.reset();
    });
    for (const figure of [...Object.keys(FIGURES).slice(1), 'stddev']) gauge(figure);
  }

  /** Stops sampling. */
  close(): void {
    this.histogram.disable();
  }
}
