import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import {
  type Device,
  MAX_OPTION_INTEGER,
  OptionReader,
  type SettingDeclaration,
  kilnHome,
} from '@kiln/core';
import type { InferenceSession } from 'onnxruntime-node';
import { ONNX_DTYPE_SUFFIXES } from './transformers-js-file.js';

export type OptLevel = 'disabled' | 'basic' | 'extended' | 'all';
export type ExecutionMode = 'sequential' | 'parallel';
export type OrtDevice = 'cpu' | 'cuda' | 'tensorrt';

/**
 * Everything a session is created with. A plain object, so that it crosses to a worker
 * thread unchanged (structured clone).
 */
export interface OrtSessionConfig {
  /** Set explicitly by the user; undefined lets ONNX Runtime pick (one per physical core). */
  readonly intraOpNumThreads: number | undefined;
  readonly interOpNumThreads: number | undefined;
  readonly executionMode: ExecutionMode;
  readonly optLevel: OptLevel;
  readonly memoryPatternOptimization: boolean;
  readonly cpuArenaAllocator: boolean;
  readonly ortDevice: OrtDevice;
  readonly deviceId: number;
  /** Writes ONNX Runtime's per-node trace (see OrtProfile). */
  readonly profiling: boolean;
  /** Where to save the model after graph optimization, for inspection. */
  readonly optimizedModelFilePath: string | undefined;
  /** 0 verbose … 4 fatal; ONNX Runtime's default is 2 (warnings). */
  readonly logSeverityLevel: 0 | 1 | 2 | 3 | 4 | undefined;
  /**
   * Whether idle thread-pool threads spin before sleeping; undefined keeps ONNX Runtime's
   * default (spin). Kiln turns it off by default: its sessions share the cores with the
   * server's event loop and with each other, and spinning threads take cores they need.
   */
  readonly allowSpinning: boolean | undefined;
  /**
   * CPU sessions of one model read their weights from one copy per process (the model saved
   * in ORT format, mapped once), instead of one copy per worker thread. `true`: the first
   * session keeps a copy of its own, which ONNX Runtime pre-packs (full speed), and the others
   * read the mapping; `all`: every session reads the mapping (least memory, slower kernels).
   */
  readonly shareWeights: boolean | 'all';
  /**
   * Where models optimized for sharing are kept across restarts (`$KILN_HOME/onnxruntime` by
   * default); undefined keeps them for the process only.
   */
  readonly optimizedModelCache: string | undefined;
  /**
   * Cores this session's intra-op threads run on, one each (the worker pool's core pinning):
   * set per execution context, never from options. Threads beyond the cores wrap around.
   */
  readonly cpuCores?: readonly number[] | undefined;
}

export const DEFAULT_SESSION_CONFIG: OrtSessionConfig = Object.freeze({
  intraOpNumThreads: undefined,
  interOpNumThreads: undefined,
  executionMode: 'sequential',
  optLevel: 'all',
  memoryPatternOptimization: true,
  cpuArenaAllocator: true,
  ortDevice: 'cpu',
  deviceId: 0,
  profiling: false,
  optimizedModelFilePath: undefined,
  logSeverityLevel: undefined,
  allowSpinning: false,
  shareWeights: true,
  optimizedModelCache: join(kilnHome(), 'onnxruntime'),
});

// DJL spells levels as Java's OptLevel enum (NO_OPT, BASIC_OPT…); ORT's own names are accepted too.
const OPT_LEVELS: Record<string, OptLevel> = {
  disabled: 'disabled',
  no_opt: 'disabled',
  basic: 'basic',
  basic_opt: 'basic',
  extended: 'extended',
  extended_opt: 'extended',
  all: 'all',
  all_opt: 'all',
};

const THREADS = { type: 'integer', min: 1, max: MAX_OPTION_INTEGER } as const;
const SWITCH = { type: 'boolean' } as const;

/** The `option.*` keys this engine reads (DJL's OnnxRuntime keys plus Kiln's). */
export const SESSION_OPTIONS: readonly SettingDeclaration[] = [
  { key: 'modelName', type: 'string', doc: "the .onnx file's name when it is not the folder's" },
  {
    key: 'dtype',
    type: 'choice',
    values: Object.keys(ONNX_DTYPE_SUFFIXES),
    default: 'fp32',
    doc: "which of a transformers.js folder's onnx/ files to load (model_fp16.onnx…)",
  },
  { key: 'intraOpNumThreads', ...THREADS, default: 'planned per worker', doc: 'threads per op' },
  { key: 'interOpNumThreads', ...THREADS, default: "ONNX Runtime's", doc: 'ops run at once' },
  {
    key: 'executionMode',
    type: 'choice',
    values: ['sequential', 'parallel'],
    default: 'sequential',
    doc: 'run independent ops in parallel',
  },
  {
    key: 'optLevel',
    type: 'choice',
    values: Object.keys(OPT_LEVELS),
    default: 'all',
    doc: 'graph optimization level',
  },
  { key: 'memoryPatternOptimization', ...SWITCH, default: 'true', doc: 'plan memory ahead' },
  { key: 'cpuArenaAllocator', ...SWITCH, default: 'true', doc: 'arena allocator on cpu' },
  {
    key: 'ortDevice',
    type: 'choice',
    values: ['cpu', 'cuda', 'tensorrt'],
    default: 'cuda on a gpu, else cpu',
    doc: 'execution provider',
  },
  { key: 'profiling', ...SWITCH, default: 'false', doc: "write ONNX Runtime's per-node trace" },
  {
    key: 'optimizedModelFilePath',
    type: 'string',
    doc: 'where to save the optimized graph, for inspection',
  },
  { key: 'logSeverityLevel', type: 'integer', min: 0, max: 4, doc: '0 verbose … 4 fatal' },
  { key: 'allowSpinning', ...SWITCH, default: 'false', doc: 'idle threads spin before sleeping' },
  {
    key: 'shareWeights',
    type: 'choice',
    values: ['true', 'false', 'all'],
    default: 'true',
    doc: "one copy of a model's weights beside the first session's pre-packed one; all: none of its own",
  },
  {
    key: 'optimizedModelCache',
    type: 'string',
    default: '$KILN_HOME/onnxruntime',
    doc: 'folder of optimized models kept across restarts, or false',
  },
  {
    key: 'disablePerSessionThreads',
    ...SWITCH,
    doc: "DJL's switch to ONNX Runtime's global thread pools",
    unsupported:
      "onnxruntime-node has no global thread pools; Kiln sizes each session's threads itself (intraOpNumThreads)",
  },
  {
    key: 'customOpLibrary',
    type: 'file',
    doc: "DJL's custom operator library (.so) registered with each session",
    refuse: (value, { modelDir }) => {
      const name = basename(value);
      if (!existsSync(modelDir === undefined ? value : resolve(modelDir, value)))
        return `${name} does not exist (a relative name is read in the model folder)`;
      return `onnxruntime-node cannot register custom operator libraries, so Kiln cannot load ${name}`;
    },
  },
];

/** The names of SESSION_OPTIONS. */
export const SESSION_OPTION_KEYS: readonly string[] = SESSION_OPTIONS.map((d) => d.key);

/**
 * Reads `option.*` values (prefix removed) over `base`. The model's device decides the
 * default execution provider: a gpu device means CUDA unless `ortDevice` says otherwise.
 */
export function parseSessionConfig(
  options: Readonly<Record<string, string>>,
  device: Device,
  base: Partial<OrtSessionConfig> = {},
): OrtSessionConfig {
  const o = new OptionReader(options, SESSION_OPTIONS);
  const defaults = { ...DEFAULT_SESSION_CONFIG, ...base };
  const ortDevice =
    o.oneOf<OrtDevice>('ortDevice') ?? (device.type === 'gpu' ? 'cuda' : defaults.ortDevice);
  if (ortDevice === 'cpu' && device.type === 'gpu') {
    throw o.invalid('ortDevice', `contradicts the model's device gpu${device.id}`);
  }
  const level = o.string('optLevel');
  return {
    intraOpNumThreads: o.integer('intraOpNumThreads') ?? defaults.intraOpNumThreads,
    interOpNumThreads: o.integer('interOpNumThreads') ?? defaults.interOpNumThreads,
    executionMode: o.oneOf<ExecutionMode>('executionMode') ?? defaults.executionMode,
    optLevel: level === undefined ? defaults.optLevel : optLevel(o, level),
    memoryPatternOptimization:
      o.boolean('memoryPatternOptimization') ?? defaults.memoryPatternOptimization,
    cpuArenaAllocator: o.boolean('cpuArenaAllocator') ?? defaults.cpuArenaAllocator,
    ortDevice,
    deviceId: device.type === 'gpu' ? device.id : 0,
    profiling: o.boolean('profiling') ?? defaults.profiling,
    optimizedModelFilePath: o.string('optimizedModelFilePath') ?? defaults.optimizedModelFilePath,
    logSeverityLevel:
      (o.integer('logSeverityLevel') as 0 | 1 | 2 | 3 | 4 | undefined) ?? defaults.logSeverityLevel,
    allowSpinning: o.boolean('allowSpinning') ?? defaults.allowSpinning,
    shareWeights:
      shareWeights(o.oneOf<'true' | 'false' | 'all'>('shareWeights')) ?? defaults.shareWeights,
    optimizedModelCache: cacheFolder(o.string('optimizedModelCache'), defaults.optimizedModelCache),
  };
}

/** ONNX Runtime's session options for a config; `profileFilePrefix` must be absolute. */
export function toSessionOptions(
  config: OrtSessionConfig,
  profileFilePrefix?: string,
): InferenceSession.SessionOptions {
  const provider =
    config.ortDevice === 'cpu'
      ? { name: 'cpu', useArena: config.cpuArenaAllocator }
      : { name: config.ortDevice, deviceId: config.deviceId };
  return {
    executionProviders: [provider],
    ...(intraOpThreadsOf(config) === undefined
      ? {}
      : { intraOpNumThreads: intraOpThreadsOf(config) }),
    ...(config.interOpNumThreads === undefined
      ? {}
      : { interOpNumThreads: config.interOpNumThreads }),
    executionMode: config.executionMode,
    graphOptimizationLevel: config.optLevel,
    enableMemPattern: config.memoryPatternOptimization,
    enableCpuMemArena: config.cpuArenaAllocator,
    ...(config.optimizedModelFilePath === undefined
      ? {}
      : { optimizedModelFilePath: config.optimizedModelFilePath }),
    ...(config.logSeverityLevel === undefined ? {} : { logSeverityLevel: config.logSeverityLevel }),
    ...sessionEntries(config),
    ...(config.profiling && profileFilePrefix ? { enableProfiling: true, profileFilePrefix } : {}),
  };
}

/** A pinned CPU session runs one intra-op thread per core unless the user chose. */
function intraOpThreadsOf(config: OrtSessionConfig): number | undefined {
  const pinned = config.ortDevice === 'cpu' && config.cpuCores?.length;
  return config.intraOpNumThreads ?? (pinned ? config.cpuCores!.length : undefined);
}

/** ONNX Runtime's `session.*` config entries: spinning, and pinned threads' affinities. */
function sessionEntries(config: OrtSessionConfig): { extra?: Record<string, unknown> } {
  const session: Record<string, unknown> = {};
  if (config.allowSpinning !== undefined) {
    const value = config.allowSpinning ? '1' : '0';
    session.intra_op = { allow_spinning: value };
    session.inter_op = { allow_spinning: value };
  }
  const threads = intraOpThreadsOf(config);
  if (config.ortDevice === 'cpu' && config.cpuCores?.length && threads && threads > 1)
    session.intra_op_thread_affinities = threadAffinities(config.cpuCores, threads);
  return Object.keys(session).length > 0 ? { extra: { session } } : {};
}

/**
 * `session.intra_op_thread_affinities`: one core for each intra-op thread but the first (the
 * calling thread, which ONNX Runtime leaves alone: the worker pinned it already), threads
 * split by `;`, processors numbered from 1 (ONNX Runtime refuses 0): cores [4, 5, 6] and 3
 * threads give `6;7`.
 */
export function threadAffinities(cores: readonly number[], threads: number): string {
  const entries: string[] = [];
  for (let thread = 1; thread < threads; thread++)
    entries.push(String(cores[thread % cores.length]! + 1));
  return entries.join(';');
}

/** `false` (or `none`) keeps optimized models for the process only; else an absolute folder. */
function cacheFolder(text: string | undefined, fallback: string | undefined): string | undefined {
  if (text === undefined) return fallback;
  if (/^(false|none|off)$/i.test(text.trim())) return undefined;
  return resolve(text);
}

function optLevel(o: OptionReader, text: string): OptLevel {
  const level = OPT_LEVELS[text.toLowerCase()];
  if (!level)
    throw o.invalid(
      'optLevel',
      "is not one of disabled, basic, extended, all (or DJL's NO_OPT, BASIC_OPT, EXTENDED_OPT, ALL_OPT)",
    );
  return level;
}

function shareWeights(value: 'true' | 'false' | 'all' | undefined): boolean | 'all' | undefined {
  return value === undefined ? undefined : value === 'all' ? 'all' : value === 'true';
}
