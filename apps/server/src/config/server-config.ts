import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'dot-properties';
import {
  KilnError,
  KilnErrorCode,
  SERVING_DEFAULTS,
  type ServingProperties,
  kilnHome,
} from '@kiln/core';
import {
  MAX_WORKER_NICE,
  type Placement,
  WORKER_POOL_DEFAULTS,
  parsePlacement,
  parseWarmupBatchSizes,
} from '@kiln/worker-pool';
import { parseGrpcAddress } from '../grpc/grpc-address.js';
import { checkConfigKeys, checkConfigValues } from './config-settings.js';
import { type CpuLauncher, parseCpuLauncher } from './cpu-launcher.js';

/** Everything the server reads from config.properties (and KILN_* environment variables). */
export interface ServerConfig {
  readonly inferenceAddress: string;
  readonly managementAddress: string;
  readonly metricsAddress: string;
  /** `host:port` of the v2 gRPC listener; undefined = off. */
  readonly grpcAddress: string | undefined;
  /** Folder of models; model URLs are allowed inside it by default. */
  readonly modelStore: string | undefined;
  /** Model URLs loaded at start (`load_models`, comma-separated; `ALL` = every entry of the store). */
  readonly loadModels: readonly string[];
  /** Regular expressions a model URL must match (`allowed_urls`, comma-separated). */
  readonly allowedUrls: readonly string[];
  /** Bearer token of the management API; generated into `keyFile` when not configured. */
  readonly managementToken: string | undefined;
  /** Turns the management API's token check off (loopback only; TorchServe's same switch). */
  readonly disableTokenAuthorization: boolean;
  /** Where a generated management key is written (JSON, mode 0600). */
  readonly keyFile: string;
  /** Host names accepted in `Host` (default: loopback names and the bound address). */
  readonly allowedHosts: readonly string[];
  /** Cross-origin `Origin`s accepted (default: none). */
  readonly allowedOrigins: readonly string[];
  /** Open connections per listener at most. */
  readonly maxConnections: number;
  /** ms for a request's headers to arrive. */
  readonly clientHeaderTimeoutMs: number;
  /** ms a client may stay silent while sending a body. */
  readonly clientBodyTimeoutMs: number;
  /** Most workers any model may ask for (min_worker, max_worker). */
  readonly maxWorkersLimit: number;
  /** Bytes; larger bodies get 413 without being buffered. */
  readonly maxRequestSize: number;
  /**
   * `max_prompt_bytes`: the longest text-generation prompt in UTF-8 bytes (a chat's rendered
   * messages); longer ones get 413 before they are tokenized. A generation request's body may
   * take 6 bytes per prompt byte (JSON escapes) + 64 KiB, never more than max_request_size.
   */
  readonly maxPromptBytes: number;
  /**
   * Bytes one request's answer may hold (`max_response_size`, default 4 × max_request_size);
   * Python-mode models refuse a larger answer with 507 before it reaches the server's memory.
   */
  readonly maxResponseSize: number;
  /**
   * `max_worker_rss_mb`: a Python-mode worker whose resident memory passes it is replaced after
   * its call (undefined: no limit). A model's option.max_worker_rss_mb overrides it.
   */
  readonly maxWorkerRssMb: number | undefined;
  /** Whole-request limit, ms (408 when exceeded while reading the body). */
  readonly requestTimeoutMs: number;
  /** Per-prediction limit from acceptance to answer, ms (a job past it never runs). */
  readonly predictTimeoutMs: number;
  /** Status for overload answers: 503 (default) or 429. */
  readonly overloadStatus: 503 | 429;
  /** Seconds advertised in Retry-After on overload. */
  readonly retryAfterS: number;
  readonly maxArchiveBytes: number;
  readonly modelCacheDir: string | undefined;
  readonly accessLog: boolean;
  /**
   * `event_loop_turn_budget_ms`: request work one event-loop turn does before the rest waits
   * for the next turn, so health checks and timers are served under load (0: no bound).
   */
  readonly eventLoopTurnBudgetMs: number;
  /** Grace period for draining on SIGTERM, ms. */
  readonly shutdownTimeoutMs: number;
  /**
   * `ingress_processes`: server processes sharing the listeners (Node's cluster), each serving
   * every model with its share of the cores; 1 = this process serves alone.
   */
  readonly ingressProcesses: number;
  /**
   * `cpu_launcher_enable` and `cpu_launcher_args` (TorchServe's): pin each model's workers to
   * their own cores (a model's serving.properties `cpu_pinning` overrides it), and the
   * allocator loaded into workers.
   */
  readonly cpuLauncher: CpuLauncher;
  /** Defaults for every model; a model's serving.properties overrides them. */
  readonly modelDefaults: Pick<
    ServingProperties,
    'jobQueueSize' | 'maxBatchDelayMs' | 'maxIdleTimeS' | 'minWorkers' | 'maxWorkers'
  > & {
    /** `batch_size`; unset, models whose inputs have a batch axis batch adaptively. */
    readonly batchSize: number | undefined;
    /**
     * `auto_batch_size`: the most requests an adaptively batched model runs at once (0 turns
     * adaptive batching off: batch size 1 unless chosen).
     */
    readonly autoBatchSize: number;
    /**
     * `placement`: where blocking engines' workers run (auto, thread, inline). `thread` by
     * default: a client chooses how many rows a request carries, and a model run inline
     * blocks the event loop for all of them.
     */
    readonly placement: Placement;
    /** `inline_forward_limit_us`: the longest full batch `auto` runs on the main thread. */
    readonly inlineForwardLimitUs: number;
    /** `worker_nice`: how many steps nicer than the server models' thread workers run. */
    readonly workerNice: number;
    /**
     * `warmup_batch_sizes`: what models' workers run before they are ready (a model's own key
     * overrides it); undefined: 1 and the batch size each model runs; empty (`none`): nothing.
     */
    readonly warmupBatchSizes: readonly number[] | undefined;
  };
}

/** config.properties keys with their defaults (TorchServe / DJL Serving spellings). */
export const CONFIG_DEFAULTS: Readonly<Record<string, string>> = {
  inference_address: 'http://127.0.0.1:8080',
  management_address: 'http://127.0.0.1:8081',
  metrics_address: 'http://127.0.0.1:8082',
  grpc_address: '',
  model_store: '',
  load_models: '',
  allowed_urls: '',
  management_token: '',
  disable_token_authorization: 'false',
  key_file: '',
  allowed_hosts: '',
  allowed_origins: '',
  max_connections: '4096',
  client_header_timeout: '30000',
  client_body_timeout: '30000',
  max_workers_limit: String(Math.max(64, 2 * os.availableParallelism())),
  max_request_size: String(64 * 1024 * 1024),
  max_prompt_bytes: String(1024 * 1024),
  max_response_size: '',
  max_worker_rss_mb: '',
  request_timeout: '120000',
  predict_timeout: '60000',
  overload_status: '503',
  retry_after: '1',
  max_archive_size: String(4 * 1024 ** 3),
  model_cache_dir: '',
  enable_access_log: 'true',
  event_loop_turn_budget_ms: '1',
  shutdown_timeout: '30000',
  ingress_processes: '1',
  cpu_launcher_enable: 'false',
  cpu_launcher_args: '',
  job_queue_size: String(SERVING_DEFAULTS.jobQueueSize),
  batch_size: '',
  auto_batch_size: '32',
  placement: 'thread',
  inline_forward_limit_us: String(WORKER_POOL_DEFAULTS.inlineForwardLimitUs),
  worker_nice: String(WORKER_POOL_DEFAULTS.workerNice),
  max_batch_delay: String(SERVING_DEFAULTS.maxBatchDelayMs),
  max_idle_time: String(SERVING_DEFAULTS.maxIdleTimeS),
  warmup_batch_sizes: '',
  min_workers: '',
  max_workers: '',
};

/** `inference_address` → `KILN_INFERENCE_ADDRESS`. */
export function envKeyFor(key: string): string {
  return `KILN_${key.toUpperCase()}`;
}

export interface LoadConfigOptions {
  /** config.properties path; missing means defaults. */
  file?: string;
  env?: Readonly<Record<string, string | undefined>>;
  /** Highest precedence (command-line flags). */
  overrides?: Readonly<Record<string, string | undefined>>;
  /** Told about keys of the file that do nothing (default: process.emitWarning). */
  onWarning?: (message: string) => void;
}

/** Defaults < config.properties < KILN_* environment < explicit overrides. */
export function loadServerConfig(options: LoadConfigOptions = {}): ServerConfig {
  const env = options.env ?? process.env;
  let fromFile: Record<string, string> = {};
  if (options.file) {
    try {
      fromFile = parse(fs.readFileSync(options.file, 'utf8')) as Record<string, string>;
    } catch (error) {
      throw KilnError.wrap(
        error,
        KilnErrorCode.InvalidConfig,
        `cannot read config file ${options.file}`,
      );
    }
    // Unknown keys (TorchServe's and DJL's too) are named, with the closest known key.
    const warn = options.onWarning ?? ((message) => process.emitWarning(message));
    for (const warning of checkConfigKeys(fromFile, CONFIG_DEFAULTS).warnings)
      warn(`${options.file}: ${warning.message}`);
  }
  const raw: Record<string, string> = { ...CONFIG_DEFAULTS };
  for (const key of Object.keys(CONFIG_DEFAULTS)) {
    const value = options.overrides?.[key] ?? env[envKeyFor(key)] ?? fromFile[key];
    if (value !== undefined) raw[key] = value;
  }
  const refused = checkConfigValues(raw, CONFIG_DEFAULTS);
  if (refused.length > 0) throw new KilnError(KilnErrorCode.InvalidConfig, refused.join('; '));
  return fromRaw(raw, options.file ? path.dirname(options.file) : process.cwd());
}

function fromRaw(raw: Record<string, string>, baseDir: string): ServerConfig {
  const int = (key: string, min = 0): number => {
    const value = Number(raw[key]);
    if (!Number.isSafeInteger(value) || value < min) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `${key}=${raw[key]} must be an integer ≥ ${min}`,
      );
    }
    return value;
  };
  const optionalInt = (key: string, min = 0) =>
    raw[key]!.trim() === '' ? undefined : int(key, min);
  const list = (key: string) =>
    raw[key]!.split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const overload = int('overload_status');
  if (overload !== 503 && overload !== 429) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `overload_status must be 503 or 429, not ${overload}`,
    );
  }
  const workersLimit = int('max_workers_limit', 1);
  for (const key of ['min_workers', 'max_workers']) {
    const value = optionalInt(key);
    if (value !== undefined && value > workersLimit) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `${key}=${value} is more than max_workers_limit (${workersLimit})`,
      );
    }
  }
  const store = raw.model_store!.trim();
  for (const key of ['inference_address', 'management_address', 'metrics_address'])
    parseAddress(raw[key]!, key);
  const grpcAddress = raw.grpc_address!.trim() || undefined;
  if (grpcAddress) parseGrpcAddress(grpcAddress);
  return {
    inferenceAddress: raw.inference_address!,
    managementAddress: raw.management_address!,
    metricsAddress: raw.metrics_address!,
    grpcAddress,
    modelStore: store === '' ? undefined : path.resolve(baseDir, store),
    loadModels: list('load_models'),
    allowedUrls: list('allowed_urls'),
    managementToken: raw.management_token!.trim() || undefined,
    disableTokenAuthorization: raw.disable_token_authorization!.trim().toLowerCase() === 'true',
    keyFile: raw.key_file!.trim()
      ? path.resolve(baseDir, raw.key_file!.trim())
      : path.join(kilnHome(), 'key_file.json'),
    allowedHosts: list('allowed_hosts'),
    allowedOrigins: list('allowed_origins'),
    maxConnections: int('max_connections', 1),
    clientHeaderTimeoutMs: int('client_header_timeout', 1),
    clientBodyTimeoutMs: int('client_body_timeout', 1),
    maxWorkersLimit: workersLimit,
    maxRequestSize: int('max_request_size', 1),
    maxPromptBytes: int('max_prompt_bytes', 1),
    maxResponseSize: optionalInt('max_response_size', 1) ?? 4 * int('max_request_size', 1),
    maxWorkerRssMb: optionalInt('max_worker_rss_mb', 1),
    requestTimeoutMs: int('request_timeout', 1),
    predictTimeoutMs: int('predict_timeout', 1),
    overloadStatus: overload,
    retryAfterS: int('retry_after'),
    maxArchiveBytes: int('max_archive_size', 1),
    modelCacheDir: raw.model_cache_dir!.trim() || undefined,
    accessLog: raw.enable_access_log!.trim().toLowerCase() !== 'false',
    eventLoopTurnBudgetMs: int('event_loop_turn_budget_ms'),
    shutdownTimeoutMs: int('shutdown_timeout'),
    ingressProcesses: ingressProcesses(int('ingress_processes', 1)),
    cpuLauncher: cpuLauncher(raw, int('ingress_processes', 1)),
    modelDefaults: {
      jobQueueSize: int('job_queue_size', 1),
      batchSize: optionalInt('batch_size', 1),
      autoBatchSize: int('auto_batch_size'),
      placement: parsePlacement(raw.placement!.trim(), `placement=${raw.placement!.trim()}`),
      inlineForwardLimitUs: int('inline_forward_limit_us'),
      workerNice: niceness(int('worker_nice')),
      warmupBatchSizes:
        raw.warmup_batch_sizes!.trim() === ''
          ? undefined
          : parseWarmupBatchSizes(raw.warmup_batch_sizes!),
      maxBatchDelayMs: int('max_batch_delay'),
      maxIdleTimeS: int('max_idle_time'),
      minWorkers: optionalInt('min_workers'),
      maxWorkers: optionalInt('max_workers'),
    },
  };
}

/** `worker_nice` as read, refused past what Linux's niceness allows. */
function niceness(steps: number): number {
  if (steps > MAX_WORKER_NICE) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `worker_nice=${steps} must be at most ${MAX_WORKER_NICE}`,
    );
  }
  return steps;
}

/** The launcher; pinning in several ingress processes would give each the same cores. */
function cpuLauncher(raw: Record<string, string>, processes: number): CpuLauncher {
  const launcher = parseCpuLauncher(raw.cpu_launcher_enable!, raw.cpu_launcher_args!);
  if (launcher.enabled && processes > 1) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `cpu_launcher_enable=true needs ingress_processes=1 (not ${processes}): each process would pin its workers to the same cores`,
    );
  }
  return launcher;
}

/** Past a few processes per core, more only cost memory and context switches. */
function ingressProcesses(count: number): number {
  const most = 4 * os.availableParallelism();
  if (count > most)
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `ingress_processes=${count} is more than 4 per core (${most} here)`,
    );
  return count;
}

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** `http://127.0.0.1:8080` → { host, port }. Only http is served; TLS belongs to a proxy. */
export function parseAddress(address: string, key = 'address'): ListenAddress {
  let url: URL;
  try {
    url = new URL(address);
  } catch {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${key}=${address} is not a URL like http://127.0.0.1:8080`,
    );
  }
  if (url.protocol !== 'http:') {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${key}=${address}: only http:// is served (put TLS in front)`,
    );
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return { host, port: url.port === '' ? 80 : Number(url.port) };
}

/** Whether a host only accepts connections from this machine. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
