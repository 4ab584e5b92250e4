import { type SettingDeclaration, type SettingsCheck, checkSettings } from '@kiln/core';
import { MAX_WORKER_NICE } from '@kiln/worker-pool';

const NO_TLS = 'Kiln serves plain http: put TLS in a proxy in front';
const METRICS = 'Kiln serves Prometheus metrics on metrics_address';

/**
 * config.properties keys of TorchServe and DJL Serving that Kiln does not implement, each
 * with what to do instead: set, they are warned about by name rather than called unknown.
 */
export const UNSUPPORTED_CONFIG_SETTINGS: readonly SettingDeclaration[] = (
  [
    ['number_of_netty_threads', 'Kiln serves HTTP on Node’s event loop (see ingress_processes)'],
    ['netty_client_threads', 'Kiln serves HTTP on Node’s event loop (see ingress_processes)'],
    ['default_workers_per_model', 'set min_workers and max_workers'],
    ['default_response_timeout', 'set predict_timeout (ms)'],
    ['number_of_gpu', 'models choose devices with load_on_devices in serving.properties'],
    ['grpc_inference_port', 'set grpc_address'],
    ['grpc_management_port', 'management is served over HTTP only'],
    ['enable_grpc_ssl', NO_TLS],
    ['keystore', NO_TLS],
    ['keystore_pass', NO_TLS],
    ['keystore_type', NO_TLS],
    ['private_key_file', NO_TLS],
    ['certificate_file', NO_TLS],
    ['cors_allowed_origin', 'set allowed_origins'],
    ['cors_allowed_methods', 'set allowed_origins'],
    ['cors_allowed_headers', 'set allowed_origins'],
    ['enable_envvars_config', 'Kiln always reads KILN_* environment variables'],
    ['install_py_dep_per_model', 'set option.enable_venv=true in the model’s serving.properties'],
    ['vmargs', 'Kiln runs on Node.js, not a JVM'],
    ['async_logging', 'Kiln writes JSON log lines to stdout'],
    ['enable_metrics_api', METRICS],
    ['metrics_mode', METRICS],
    ['metrics_config', METRICS],
    ['model_snapshot', 'Kiln loads load_models at start and keeps no snapshot'],
    ['plugins_path', 'engines are npm packages found where Kiln is installed'],
    ['plugin_folder', 'engines are npm packages found where Kiln is installed'],
    ['workflow_store', 'Kiln serves models, not workflows'],
  ] as const
).map(([key, why]) => ({
  key,
  type: 'string',
  doc: `TorchServe / DJL Serving's ${key}`,
  unsupported: why,
}));

type ConfigType = Omit<SettingDeclaration, 'key' | 'default'>;

const URL = { type: 'string', doc: 'listener, http://host:port' } as const;
const LIST = (doc: string): ConfigType => ({ type: 'list', doc: `${doc}, comma-separated` });
const COUNT = (min: number, doc: string): ConfigType => ({ type: 'integer', min, doc });
const SWITCH = (doc: string): ConfigType => ({ type: 'choice', values: ['true', 'false'], doc });

/**
 * What each config.properties key holds (its default is CONFIG_DEFAULTS'). A key missing here
 * is still known, read as text; a switch's value must be true or false, never a silent false.
 */
const CONFIG_TYPES: Readonly<Record<string, ConfigType>> = {
  inference_address: URL,
  management_address: URL,
  metrics_address: URL,
  grpc_address: { type: 'string', doc: 'v2 gRPC listener, host:port (blank: off)' },
  model_store: { type: 'string', doc: 'folder of models' },
  load_models: LIST('model URLs loaded at start, or ALL'),
  allowed_urls: LIST('regular expressions a model URL must match'),
  management_token: { type: 'string', doc: "management API's bearer token" },
  disable_token_authorization: SWITCH("turn the management API's token check off (loopback)"),
  key_file: { type: 'string', doc: 'where a generated management key is written' },
  allowed_hosts: LIST('Host names accepted'),
  allowed_origins: LIST('cross-origin Origins accepted'),
  max_connections: COUNT(1, 'open connections per listener'),
  client_header_timeout: COUNT(1, "ms for a request's headers"),
  client_body_timeout: COUNT(1, 'ms a client may stay silent sending a body'),
  max_workers_limit: COUNT(1, 'most workers a model may ask for'),
  max_request_size: COUNT(1, 'bytes of a request body'),
  max_prompt_bytes: COUNT(1, 'UTF-8 bytes of a text-generation prompt'),
  max_response_size: COUNT(1, "bytes of a Python handler's answer (4 × max_request_size)"),
  max_worker_rss_mb: COUNT(1, 'MiB a Python worker may hold before it is replaced'),
  request_timeout: COUNT(1, 'ms to receive a whole request'),
  predict_timeout: COUNT(1, 'ms from acceptance to answer'),
  overload_status: { type: 'integer', doc: 'status of overload answers, 503 or 429' },
  retry_after: COUNT(0, 'Retry-After seconds on overload'),
  max_archive_size: COUNT(1, 'bytes of a model archive'),
  model_cache_dir: { type: 'string', doc: 'where archives are extracted' },
  enable_access_log: SWITCH('write an access log line per request'),
  event_loop_turn_budget_ms: COUNT(0, 'request work per event-loop turn (0: no bound)'),
  shutdown_timeout: COUNT(0, 'ms to drain on SIGTERM'),
  ingress_processes: COUNT(1, 'server processes sharing the listeners'),
  cpu_launcher_enable: SWITCH("pin each model's workers to their own cores (TorchServe's)"),
  cpu_launcher_args: {
    type: 'string',
    doc:
      "TorchServe's launcher flags: --use_logical_core, --ninstances N, --node_id N, " +
      '--disable_numactl, --enable_jemalloc, --enable_tcmalloc, --use_default_allocator',
  },
  job_queue_size: COUNT(1, "default of models' job_queue_size"),
  batch_size: COUNT(1, "default of models' batch_size (blank: adaptive)"),
  auto_batch_size: COUNT(0, 'most requests an adaptively batched model runs at once'),
  placement: { type: 'string', doc: "where blocking engines' workers run: auto, thread, inline" },
  inline_forward_limit_us: COUNT(0, 'the longest batch placement=auto runs inline'),
  worker_nice: {
    type: 'integer',
    min: 0,
    max: MAX_WORKER_NICE,
    doc: "how much nicer than the server models' thread workers run (Linux; 0: as the server)",
  },
  max_batch_delay: COUNT(0, "default of models' max_batch_delay (ms)"),
  max_idle_time: COUNT(0, "default of models' max_idle_time (s)"),
  warmup_batch_sizes: LIST("default of models' warmup_batch_sizes (blank: 1 and batch_size; none)"),
  min_workers: COUNT(0, "default of models' minWorkers"),
  max_workers: COUNT(0, "default of models' maxWorkers"),
};

/** Every config.properties key: those with defaults (typed above) and the unsupported ones. */
export function configSettings(
  defaults: Readonly<Record<string, string>>,
): readonly SettingDeclaration[] {
  const known = Object.entries(defaults).map(([key, value]): SettingDeclaration => ({
    key,
    ...(CONFIG_TYPES[key] ?? { type: 'string', doc: key }),
    default: value,
  }));
  return [...known, ...UNSUPPORTED_CONFIG_SETTINGS];
}

/** Checks a config.properties file's keys: unknown and unsupported ones are warnings. */
export function checkConfigKeys(
  fromFile: Readonly<Record<string, string>>,
  defaults: Readonly<Record<string, string>>,
): SettingsCheck {
  return checkSettings(fromFile, configSettings(defaults));
}

/** Values in force (file, environment, flags) that are not what their key takes. */
export function checkConfigValues(
  raw: Readonly<Record<string, string>>,
  defaults: Readonly<Record<string, string>>,
): readonly string[] {
  return checkSettings(raw, configSettings(defaults)).errors;
}
