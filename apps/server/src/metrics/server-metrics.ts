import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from './prom-client-parts.js';
import { EventLoopDelayGauges } from './event-loop-delay.js';

const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/** @kiln/engine-python's CALL_TIMINGS_CHANNEL. */
const PYTHON_CALL_CHANNEL = 'kiln:python:call';

/** The server's Prometheus metrics, in one registry served at GET /metrics. */
export class ServerMetrics {
  readonly registry = new Registry();
  private eventLoopDelay: EventLoopDelayGauges | undefined;

  readonly requests = new Counter({
    name: 'kiln_requests_total',
    help: 'HTTP requests by route, model and status code',
    labelNames: ['api', 'route', 'model', 'status'] as const,
    registers: [this.registry],
  });
  readonly requestSeconds = new Histogram({
    name: 'kiln_request_duration_seconds',
    help: 'Whole request time on the server',
    labelNames: ['api', 'route', 'model'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly queueSeconds = this.stage('kiln_queue_seconds', 'Time a job waited in its model queue');
  readonly preprocessSeconds = this.stage(
    'kiln_preprocess_seconds',
    'Translator pre-processing time per batch',
  );
  readonly inferenceSeconds = this.stage('kiln_inference_seconds', 'Engine forward time per batch');
  readonly postprocessSeconds = this.stage(
    'kiln_postprocess_seconds',
    'Translator post-processing time per batch',
  );
  readonly pythonIpcSeconds = this.stage(
    'kiln_python_ipc_seconds',
    'Python mode: per call, the round trip to the Python worker less the handler (framing, pipes, decoding)',
  );
  readonly pythonHandlerSeconds = this.stage(
    'kiln_python_handler_seconds',
    'Python mode: per call, handle(inputs) itself, measured in the Python worker',
  );
  readonly batchSize = new Histogram({
    name: 'kiln_batch_size',
    help: 'Jobs per model execution',
    labelNames: ['model'] as const,
    buckets: BATCH_BUCKETS,
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'kiln_queue_depth',
    help: 'Jobs waiting in a model queue',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly workers = new Gauge({
    name: 'kiln_workers',
    help: 'Workers of a model by state',
    labelNames: ['model', 'state'] as const,
    registers: [this.registry],
  });
  readonly modelLoadSeconds = new Gauge({
    name: 'kiln_model_load_seconds',
    help: 'Time the last load of a model took',
    labelNames: ['model'] as const,
    registers: [this.registry],
    aggregator: 'max',
  });
  readonly modelStatus = new Gauge({
    name: 'kiln_model_ready',
    help: '1 when a model serves, 0 while it loads or after it failed',
    labelNames: ['model'] as const,
    registers: [this.registry],
    // With several ingress processes: ready only where every process serves it.
    aggregator: 'min',
  });
  readonly ingressProcesses = new Gauge({
    name: 'kiln_ingress_processes',
    help: 'Server processes answering on the listeners (summed over ingress_processes)',
    registers: [this.registry],
  });

  /**
   * `processMetrics: 'later'` leaves Node's process metrics (prom-client's defaults and the event
   * loop's delay) to collectProcessMetrics(): a starting server registers its models first and
   * calls it before it listens, so that loading them does not wait for those modules.
   */
  constructor(options: { processMetrics?: 'now' | 'later' } = {}) {
    if (options.processMetrics !== 'later') this.collectProcessMetrics();
    subscribe(PYTHON_CALL_CHANNEL, this.onPythonCall);
    this.ingressProcesses.set(1);
  }

  /** Starts collecting Node's process metrics (once). */
  collectProcessMetrics(): void {
    if (this.eventLoopDelay) return;
    // prom-client's loop-delay figures include its sampling interval (~10 ms on an idle
    // server); EventLoopDelayGauges reports them without it. prom-client's own sampler cannot be
    // turned off, so it samples once a second, unread.
    collectDefaultMetrics({
      register: this.registry,
      prefix: 'kiln_',
      eventLoopMonitoringPrecision: 1000,
    });
    for (const figure of ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99']) {
      this.registry.removeSingleMetric(`kiln_nodejs_eventloop_lag_${figure}_seconds`);
    }
    this.eventLoopDelay = new EventLoopDelayGauges(this.registry, 'kiln_');
    // prom-client also exports these sums as gauges named like counters, which Prometheus
    // tooling (promtool check metrics) rejects; the per-type gauges without `_total` stay.
    for (const name of ['active_handles', 'active_requests', 'active_resources']) {
      this.registry.removeSingleMetric(`kiln_nodejs_${name}_total`);
    }
  }

  /** Stops listening to engines' timing channels and sampling the event loop. */
  close(): void {
    unsubscribe(PYTHON_CALL_CHANNEL, this.onPythonCall);
    this.eventLoopDelay?.close();
  }

  /** The Python engine publishes each call's split (no import: the engine is optional). */
  private readonly onPythonCall = (message: unknown): void => {
    const { model, ipcMs, handlerMs } = message as {
      model: string;
      ipcMs: number;
      handlerMs: number;
    };
    this.pythonIpcSeconds.observe({ model }, ipcMs / 1000);
    this.pythonHandlerSeconds.observe({ model }, handlerMs / 1000);
  };

  private stage(name: string, help: string): Histogram<'model'> {
    return new Histogram({
      name,
      help,
      labelNames: ['model'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [this.registry],
    });
  }
}
