import type { SettingDeclaration } from '../settings/setting-declaration.js';
import {
  BATCHIFIER_CHOICES,
  DEFAULT_BUCKET_BOUNDARIES,
  parseBucketBoundaries,
  parsePadAxes,
  parsePadValue,
  refusalOf,
} from './sequence-batching.js';

const WORKERS = { type: 'integer', min: 0 } as const;

/** serving.properties keys Kiln reads for every model, whatever its engine and translator. */
export const SERVING_SETTINGS: readonly SettingDeclaration[] = [
  { key: 'engine', type: 'string', doc: 'engine to load with (OnnxRuntime, PyTorch, …)' },
  {
    key: 'translatorFactory',
    type: 'string',
    doc: 'built-in translator (raw, image-classification, a DJL class name) or a .js plugin',
  },
  {
    key: 'application',
    type: 'string',
    doc: 'picks a built-in translator when none is named (image_classification)',
  },
  { key: 'name', type: 'string', doc: "the model's name (default: its file or folder)" },
  { key: 'model_name', type: 'string', doc: 'the same as name' },
  { key: 'version', type: 'string', doc: "the model's version" },
  { key: 'load_on_devices', type: 'string', default: 'cpu', doc: '*, or devices split by ;' },
  { key: 'job_queue_size', type: 'integer', min: 1, default: '1000', doc: 'requests waiting' },
  { key: 'batch_size', type: 'integer', min: 1, default: 'adaptive', doc: 'rows per forward' },
  { key: 'max_batch_delay', type: 'integer', min: 0, default: '100', doc: 'ms to fill a batch' },
  { key: 'max_idle_time', type: 'integer', min: 0, default: '60', doc: 's before scaling down' },
  {
    key: 'warmup_batch_sizes',
    type: 'list',
    default: '1 and batch_size (adaptive: auto_batch_size)',
    doc: 'batch sizes each worker runs on zeros before the model is ready (none: no warm-up)',
  },
  {
    key: 'warmup_shape',
    type: 'string',
    default: 'the declared shapes, free dimensions 1',
    doc: "one warm-up request's input shapes, inputs split by |: 1,128 or 1,128|1,128",
  },
  {
    key: 'placement',
    type: 'choice',
    values: ['auto', 'thread', 'inline'],
    default: 'thread',
    doc: "where a blocking engine's workers run",
  },
  {
    key: 'inline_forward_limit_us',
    type: 'integer',
    min: 0,
    doc: 'the longest batch placement=auto runs on the main thread',
  },
  {
    key: 'worker_nice',
    type: 'integer',
    min: 0,
    max: 19,
    default: "config.properties' worker_nice (5)",
    doc: 'how much nicer than the server its thread workers run (Linux; 0: as the server)',
  },
  {
    key: 'batchifier',
    type: 'choice',
    values: BATCHIFIER_CHOICES,
    default: "the translator's (stack)",
    doc: "how requests join a batch: stack (same shapes), pad (pad to the longest), bucket (pad within length buckets), none; padding is DJL's pad",
  },
  {
    key: 'pad_value',
    type: 'string',
    default: '0',
    doc: 'what padding holds: a number, or input:number pairs split by commas (batchifier=pad or bucket)',
    refuse: refusalOf(parsePadValue),
  },
  {
    key: 'pad_axes',
    type: 'list',
    default: 'every axis but 0',
    doc: 'axes that may differ between requests and are padded (batchifier=pad or bucket)',
    refuse: refusalOf(parsePadAxes),
  },
  {
    key: 'bucket_boundaries',
    type: 'list',
    default: DEFAULT_BUCKET_BOUNDARIES.join(','),
    doc: 'upper bounds of the length buckets; only requests of one bucket share a batch (batchifier=bucket)',
    refuse: refusalOf(parseBucketBoundaries),
  },
  {
    key: 'bucket_by',
    type: 'string',
    default: 'the first input',
    doc: 'input whose length (its first padded axis) picks the bucket (batchifier=bucket)',
  },
  { key: 'minWorkers', ...WORKERS, doc: 'workers kept running' },
  { key: 'maxWorkers', ...WORKERS, doc: 'workers at most' },
  { key: 'cpu.minWorkers', ...WORKERS, doc: 'minWorkers on cpu' },
  { key: 'cpu.maxWorkers', ...WORKERS, doc: 'maxWorkers on cpu' },
  { key: 'gpu.minWorkers', ...WORKERS, doc: 'minWorkers per gpu' },
  { key: 'gpu.maxWorkers', ...WORKERS, doc: 'maxWorkers per gpu' },
  {
    key: 'cpu_pinning',
    type: 'boolean',
    default: "config.properties' cpu_launcher_enable (false)",
    doc: 'pin each CPU worker and its engine threads to physical cores of its own (Linux)',
  },
  {
    key: 'cpu_pinning_logical_cores',
    type: 'boolean',
    default: 'false (--use_logical_core)',
    doc: 'with cpu_pinning, hyperthread siblings count as cores',
  },
  {
    key: 'cpu_pinning_node',
    type: 'integer',
    min: 0,
    default: 'every node (--node_id)',
    doc: "with cpu_pinning, only this NUMA node's cores",
  },
  {
    key: 'max_response_size',
    type: 'integer',
    min: 1,
    doc: 'bytes one answer may hold; the server writes its max_response_size here (Python mode reads it)',
  },
  {
    key: 'max_worker_rss_mb',
    type: 'integer',
    min: 0,
    doc: 'the server writes its max_worker_rss_mb here (Python mode reads it)',
  },
  {
    key: 'allocator',
    type: 'choice',
    values: ['jemalloc', 'tcmalloc', 'default'],
    doc: "the server writes cpu_launcher_args' allocator here (Python mode reads it; option.allocator wins)",
  },
  {
    key: 'translator',
    type: 'string',
    doc: "DJL's translator class; Kiln picks translators with translatorFactory",
    unsupported: 'name a translator with translatorFactory',
  },
  {
    key: 'log_model_metric',
    type: 'boolean',
    doc: "DJL's per-model metric logging",
    unsupported: 'Kiln reports every model on its metrics listener (/metrics)',
  },
  {
    key: 'log_request_metric',
    type: 'boolean',
    doc: "DJL's per-request metric logging",
    unsupported: 'Kiln reports request metrics on its metrics listener (/metrics)',
  },
  {
    key: 'metrics_aggregation',
    type: 'integer',
    doc: "DJL's metric aggregation window",
    unsupported: 'Kiln exports Prometheus histograms on /metrics',
  },
  {
    key: 'required_memory_mb',
    type: 'integer',
    doc: "DJL's memory reservation before a model loads",
    unsupported: 'Kiln does not reserve memory per model',
  },
  {
    key: 'reserved_memory_mb',
    type: 'integer',
    doc: "DJL's memory kept free per device",
    unsupported: 'Kiln does not reserve memory per model',
  },
];

/**
 * DJL LMI's rolling-batch backends other than its own scheduler. Kiln runs none of them, and
 * loading the model as a plain one instead would answer something else than asked for.
 */
const OTHER_ROLLING_BATCHERS = ['lmi-dist', 'vllm', 'trtllm', 'deepspeed', 'tnx', 'lmi-dist-v2'];

/** `option.*` keys the server reads itself, for any engine (text generation). */
export const SERVING_OPTION_SETTINGS: readonly SettingDeclaration[] = [
  {
    key: 'model_id',
    type: 'string',
    default: "the model's folder",
    doc: "where the model's files are (config.json, tokenizer, onnx/): a folder or archive, absolute or relative to the model's folder; Kiln downloads nothing, so a Hugging Face Hub id or remote URL naming no local folder fails the load (Python mode hands it to the handler)",
  },
  {
    key: 'rolling_batch',
    type: 'choice',
    values: ['auto', 'scheduler', 'disable'],
    default: 'disable',
    doc: "text generation with Kiln's rolling-batch scheduler (auto and scheduler turn it on)",
    refuse: (value) =>
      OTHER_ROLLING_BATCHERS.includes(value.toLowerCase())
        ? `Kiln has no ${value} backend: use auto or scheduler (Kiln's rolling-batch scheduler on ONNX Runtime), or disable`
        : undefined,
  },
  {
    key: 'max_rolling_batch_size',
    type: 'integer',
    min: 1,
    default: '32',
    doc: 'sequences generated at once',
  },
  {
    key: 'max_rolling_batch_prefill_tokens',
    type: 'integer',
    min: 1,
    default: '4096',
    doc: 'prompt tokens prefilled per step',
  },
  {
    key: 'max_kv_cache_bytes',
    type: 'integer',
    min: 1,
    default: 'batch size × longest sequence',
    doc: 'key/value cache budget',
  },
  {
    key: 'rolling_batch_admission',
    type: 'choice',
    values: ['first_come', 'longest_first'],
    default: 'first_come',
    doc: 'order waiting requests are admitted in: arrival, or most max_new_tokens first (aging a token a step waited)',
  },
];
