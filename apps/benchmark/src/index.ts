export { type RunBenchOptions, runBench } from './cli/bench-program.js';
export type { BenchIo, OutputStream } from './cli/run-plan.js';
export { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './cli/bench-errors.js';
export {
  type InputSpec,
  SHAPE_DTYPE_SUFFIXES,
  formatShapes,
  parseShapes,
} from './options/shapes.js';
export { formatDuration, parseDuration } from './options/duration.js';
export { parseSweep, type SweepLimits } from './options/sweep.js';
export { LatencyHistogram, type LatencySummary } from './stats/latency-histogram.js';
export {
  DEFAULT_STABILITY,
  type StabilityRule,
  type WindowSample,
  isStable,
} from './stats/stability.js';
export {
  type HistogramSnapshot,
  histogramDelta,
  histogramOf,
  histogramQuantile,
  parsePrometheusText,
} from './stats/prometheus.js';
export {
  checkSpecsAgainst,
  specsFromSignature,
  syntheticTensors,
} from './inputs/synthetic-tensors.js';
export {
  type LevelMeasurement,
  type MeasureOptions,
  type Send,
  measureConcurrency,
  measureRate,
} from './load/measure-level.js';
export {
  type InProcessBenchOptions,
  runInProcessBench,
  resolveWorkers,
} from './inprocess/in-process-bench.js';
export { type HttpBenchOptions, runHttpBench } from './http/http-bench.js';
export { type ServerSplit, type StageEstimate, ServerMetricsReader } from './http/server-split.js';
export { type Protocol, PROTOCOLS } from './inputs/http-bodies.js';
export { type TuneOptions, bestLevel, runTune } from './tune/tune.js';
export {
  configPropertiesText,
  recommendedConfigProperties,
  recommendedProperties,
  servingPropertiesText,
} from './tune/recommendation.js';
export { textReport, type TextStyle } from './report/text-report.js';
export { csvReport } from './report/csv-report.js';
export { htmlReport } from './report/html-report.js';
export {
  barChart,
  lineChart,
  niceTicks,
  type BarChartOptions,
  type LineChartOptions,
} from './report/svg-charts.js';
export { formatBytes, formatMs, formatRate, textTable } from './report/format.js';
export { type ProgressReporter, NO_PROGRESS, terminalProgress } from './progress.js';
export type * from './results.js';
export { STAGES } from './results.js';
