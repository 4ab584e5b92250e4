import { Counter, Gauge, Histogram } from '../metrics/prom-client-parts.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import type { GenerationPool, GenerationStats } from '@kiln/worker-pool';

const TOKEN_LATENCY_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/**
 * Text-generation metrics in the server's registry: time to first token, inter-token
 * latency, tokens generated (rate() of it is tokens/s), and per model the active and
 * waiting sequences and the KV cache in use, read when Prometheus scrapes.
 */
export class GenerationMetrics {
  private readonly models = new Map<string, GenerationPool>();
  readonly timeToFirstToken: Histogram<'model'>;
  readonly interToken: Histogram<'model'>;
  readonly tokens: Counter<'model'>;

  constructor(metrics: ServerMetrics) {
    const registers = [metrics.registry];
    this.timeToFirstToken = new Histogram({
      name: 'kiln_generation_time_to_first_token_seconds',
      help: 'From a generation request to its first token',
      labelNames: ['model'] as const,
      buckets: TOKEN_LATENCY_BUCKETS,
      registers,
    });
    this.interToken = new Histogram({
      name: 'kiln_generation_inter_token_seconds',
      help: 'Gap between consecutive tokens of one sequence',
      labelNames: ['model'] as const,
      buckets: TOKEN_LATENCY_BUCKETS,
      registers,
    });
    this.tokens = new Counter({
      name: 'kiln_generation_tokens_total',
      help: 'Tokens generated',
      labelNames: ['model'] as const,
      registers,
    });
    const models = this.models;
    const gauge = (name: string, help: string, read: (s: GenerationStats) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['model'] as const,
        registers,
        collect() {
          this.reset();
          for (const [model, pool] of models) this.set({ model }, read(pool.generation()));
        },
      });
    gauge('kiln_generation_active_sequences', 'Sequences in the rolling batch', (s) => s.active);
    gauge('kiln_generation_waiting_sequences', 'Requests waiting for a slot', (s) => s.waiting);
    gauge(
      'kiln_generation_kv_cache_bytes',
      'KV cache held by active sequences',
      (s) => s.cacheBytesUsed,
    );
    gauge(
      'kiln_generation_kv_cache_reserved_ratio',
      'Share of the KV cache budget reserved by active sequences',
      (s) => (s.cacheTokensBudget > 0 ? s.cacheTokensReserved / s.cacheTokensBudget : 0),
    );
  }

  watch(name: string, pool: GenerationPool): void {
    this.models.set(name, pool);
  }

  /** Stops reading `pool` (another version of the model may be the one watched now). */
  forget(name: string, pool: GenerationPool): void {
    if (this.models.get(name) === pool) this.models.delete(name);
  }

  /** Records one finished request's token timings. */
  record(
    model: string,
    timeToFirstTokenMs: number | undefined,
    interTokenMs: readonly number[],
  ): void {
    if (timeToFirstTokenMs !== undefined)
      this.timeToFirstToken.observe({ model }, timeToFirstTokenMs / 1000);
    for (const gap of interTokenMs) this.interToken.observe({ model }, gap / 1000);
    this.tokens.inc({ model }, interTokenMs.length + (timeToFirstTokenMs === undefined ? 0 : 1));
  }
}
