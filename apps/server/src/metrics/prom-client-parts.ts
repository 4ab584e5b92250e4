import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

// prom-client's index loads all of it at once: the push gateway, summaries, cluster aggregation
// and the default process metrics with @opentelemetry/api, 30–45 ms of a start where the server
// needs four classes before its models are registered (4 ms). Its files are required one by
// one instead (the same files its index requires, so classes are the same either way); the
// rest loads when first used.
const require = createRequire(import.meta.url);

export const Registry = require('prom-client/lib/registry') as typeof PromClient.Registry;
export const Counter = require('prom-client/lib/counter') as typeof PromClient.Counter;
export const Gauge = require('prom-client/lib/gauge') as typeof PromClient.Gauge;
export const Histogram = require('prom-client/lib/histogram') as typeof PromClient.Histogram;
export type Registry = PromClient.Registry;
export type Counter<T extends string = string> = PromClient.Counter<T>;
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export type Histogram<T extends string = string> = PromClient.Histogram<T>;

/** prom-client's default process metrics. */
export function collectDefaultMetrics(
  config: PromClient.DefaultMetricsCollectorConfiguration<PromClient.RegistryContentType>,
): void {
  (require('prom-client/lib/defaultMetrics') as typeof PromClient.collectDefaultMetrics)(config);
}

/** prom-client's registry that merges the metrics of cluster workers. */
export function aggregatorRegistry(): typeof PromClient.AggregatorRegistry {
  return require('prom-client/lib/cluster') as typeof PromClient.AggregatorRegistry;
}
