import {
  type HistogramSnapshot,
  type PrometheusSamples,
  histogramDelta,
  histogramOf,
  histogramQuantile,
  parsePrometheusText,
} from '../stats/prometheus.js';
import { getText } from './http-client.js';

/** One server-side stage, from the server's histograms: estimates within a bucket. */
export interface StageEstimate {
  readonly meanMs: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
}

/** Where the server says a level's time went (Kiln's /metrics), per job or batch. */
export interface ServerSplit {
  /** Jobs the server counted in the interval. */
  readonly jobs: number;
  /** Executions (batches) it ran. */
  readonly batches: number;
  readonly meanBatchSize: number;
  readonly queue: StageEstimate;
  readonly preprocess: StageEstimate;
  readonly inference: StageEstimate;
  readonly postprocess: StageEstimate;
}

/** Kiln's stage histograms (seconds), by the stage they time. */
export const STAGE_METRICS = {
  queue: 'kiln_queue_seconds',
  preprocess: 'kiln_preprocess_seconds',
  inference: 'kiln_inference_seconds',
  postprocess: 'kiln_postprocess_seconds',
} as const;
const BATCH_SIZE_METRIC = 'kiln_batch_size';

/** Reads a Kiln server's /metrics for one model, to difference two readings. */
export class ServerMetricsReader {
  constructor(
    private readonly url: URL,
    private readonly model: string,
  ) {}

  async read(): Promise<PrometheusSamples> {
    const { status, text } = await getText(this.url);
    if (status !== 200) throw new Error(`GET ${this.url.href} answered ${status}`);
    return parsePrometheusText(text);
  }

  /**
   * The split between two readings; undefined when the server exports no Kiln stage
   * histograms for the model (another server, or a model that ran nothing).
   */
  split(before: PrometheusSamples, after: PrometheusSamples): ServerSplit | undefined {
    const delta = (name: string): HistogramSnapshot | undefined => {
      const end = histogramOf(after, name, { model: this.model });
      return end && histogramDelta(histogramOf(before, name, { model: this.model }), end);
    };
    const queue = delta(STAGE_METRICS.queue);
    const batches = delta(BATCH_SIZE_METRIC);
    const stages = {
      preprocess: delta(STAGE_METRICS.preprocess),
      inference: delta(STAGE_METRICS.inference),
      postprocess: delta(STAGE_METRICS.postprocess),
    };
    if (
      !queue ||
      !batches ||
      !stages.preprocess ||
      !stages.inference ||
      !stages.postprocess ||
      queue.count === 0
    ) {
      return undefined;
    }
    return {
      jobs: queue.count,
      batches: batches.count,
      meanBatchSize: batches.count === 0 ? 0 : batches.sum / batches.count,
      queue: estimate(queue),
      preprocess: estimate(stages.preprocess),
      inference: estimate(stages.inference),
      postprocess: estimate(stages.postprocess),
    };
  }
}

function estimate(seconds: HistogramSnapshot): StageEstimate {
  const ms = (s: number) => s * 1000;
  return {
    meanMs: seconds.count === 0 ? 0 : ms(seconds.sum / seconds.count),
    p50Ms: ms(histogramQuantile(seconds, 0.5)),
    p90Ms: ms(histogramQuantile(seconds, 0.9)),
    p99Ms: ms(histogramQuantile(seconds, 0.99)),
  };
}
