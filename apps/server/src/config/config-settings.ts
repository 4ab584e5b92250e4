import { type SettingDeclaration, type SettingsCheck, checkSettings } from '@kiln/core';

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

/** Checks a config.properties file's keys: known ones (with their defaults) and the above. */
export function checkConfigKeys(
  fromFile: Readonly<Record<string, string>>,
  defaults: Readonly<Record<string, string>>,
): SettingsCheck {
  const known: SettingDeclaration[] = Object.entries(defaults).map(([key, value]) => ({
    key,
    type: 'string',
    default: value,
    doc: key,
  }));
  return checkSettings(fromFile, [...known, ...UNSUPPORTED_CONFIG_SETTINGS]);
}
