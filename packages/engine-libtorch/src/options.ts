import { availableParallelism } from 'node:os';
import { OptionReader, type SettingDeclaration } from '@kiln/core';

/**
 * Engine-wide settings of the PyTorch engine (DJL's `ai.djl.pytorch.*` properties). Every one
 * is also a per-model `option.*` key of serving.properties, which takes precedence.
 */
export interface LibTorchEngineOptions {
  /** Preference when no engine is named; 10 by default. */
  readonly rank?: number;
  /** Intra-op threads per forward (`num_threads`); default: every core. */
  readonly numThreads?: number;
  /** Inter-op pool size (`num_interop_threads`); fixed once per process by LibTorch. */
  readonly numInteropThreads?: number;
  /** Graph-executor optimizer (`graph_optimizer`); default true. */
  readonly graphOptimizer?: boolean;
  /** oneDNN / MKLDNN kernels (`use_mkldnn`); default: LibTorch's (on). */
  readonly useMkldnn?: boolean;
  /** cuDNN (`use_cudnn`); meaningful on CUDA builds; default: LibTorch's (on). */
  readonly useCudnn?: boolean;
  /** cuDNN autotuning (`cudnn_benchmark`); default: LibTorch's (off). */
  readonly cudnnBenchmark?: boolean;
  /**
   * Freeze and fuse after load (`optimize_for_inference`): conv-batchnorm folding, oneDNN
   * layouts. Default true (1.3-1.9x faster on ResNet-18 at batch 1 and 8, bench/libtorch); a
   * module that cannot be optimized then loads as it is.
   */
  readonly optimizeForInference?: boolean;
}

/** What one model runs with: its options over the engine's, with defaults filled in. */
export interface PtModelSettings {
  readonly numThreads: number;
  readonly numInteropThreads: number | undefined;
  readonly graphOptimizer: boolean;
  readonly useMkldnn: boolean | undefined;
  readonly useCudnn: boolean | undefined;
  readonly cudnnBenchmark: boolean | undefined;
  readonly optimizeForInference: boolean;
  /** Nobody chose optimize_for_inference: a module it fails on loads unoptimized. */
  readonly optimizeByDefault: boolean;
  /** DJL's `mapLocation`: deserialize straight onto the model's device (default true). */
  readonly mapLocation: boolean;
  /** DJL's `extraFiles`: names of files in the archive to read back. */
  readonly extraFiles: readonly string[];
  /** Input shapes run at load (`warmup`); see parseWarmup. */
  readonly warmup: string | undefined;
  /** Forwards per warm-up shape (`warmup_iterations`, default 2: profile, then optimize). */
  readonly warmupIterations: number;
}

/** Keys that may be set for the whole engine too (`KILN_PYTORCH_<KEY>`). */
const ENGINE_WIDE_KEYS = [
  'num_threads',
  'num_interop_threads',
  'graph_optimizer',
  'use_mkldnn',
  'use_cudnn',
  'cudnn_benchmark',
  'optimize_for_inference',
] as const;

const SWITCH = { type: 'boolean' } as const;

/** The `option.*` keys this engine reads (DJL's PyTorch keys plus Kiln's). */
export const PT_OPTIONS: readonly SettingDeclaration[] = [
  { key: 'modelName', type: 'string', doc: "the .pt file's name when it is not the folder's" },
  { key: 'num_threads', type: 'integer', min: 1, default: 'every core', doc: 'intra-op threads' },
  { key: 'num_interop_threads', type: 'integer', min: 1, doc: 'inter-op pool, once per process' },
  { key: 'graph_optimizer', ...SWITCH, default: 'true', doc: 'graph-executor optimizer' },
  { key: 'use_mkldnn', ...SWITCH, default: "LibTorch's (on)", doc: 'oneDNN kernels' },
  { key: 'use_cudnn', ...SWITCH, default: "LibTorch's (on)", doc: 'cuDNN on CUDA builds' },
  { key: 'cudnn_benchmark', ...SWITCH, default: "LibTorch's (off)", doc: 'cuDNN autotuning' },
  { key: 'optimize_for_inference', ...SWITCH, default: 'true', doc: 'freeze and fuse at load' },
  { key: 'mapLocation', ...SWITCH, default: 'true', doc: "load straight onto the model's device" },
  { key: 'extraFiles', type: 'list', doc: 'files of the archive to read back, comma-separated' },
  {
    key: 'warmup',
    type: 'string',
    doc: 'input shapes run at load on one context (warmup_batch_sizes warms every worker)',
  },
  { key: 'warmup_iterations', type: 'integer', min: 1, default: '2', doc: 'forwards per shape' },
];

/** The names of PT_OPTIONS. */
export const PT_OPTION_KEYS: readonly string[] = PT_OPTIONS.map((d) => d.key);

export function resolveModelSettings(
  options: Readonly<Record<string, string>>,
  engine: LibTorchEngineOptions = {},
): PtModelSettings {
  const o = new OptionReader(options, PT_OPTIONS);
  return {
    numThreads: o.integer('num_threads') ?? engine.numThreads ?? availableParallelism(),
    numInteropThreads: o.integer('num_interop_threads') ?? engine.numInteropThreads,
    graphOptimizer: o.boolean('graph_optimizer') ?? engine.graphOptimizer ?? true,
    useMkldnn: o.boolean('use_mkldnn') ?? engine.useMkldnn,
    useCudnn: o.boolean('use_cudnn') ?? engine.useCudnn,
    cudnnBenchmark: o.boolean('cudnn_benchmark') ?? engine.cudnnBenchmark,
    optimizeForInference:
      o.boolean('optimize_for_inference') ?? engine.optimizeForInference ?? true,
    optimizeByDefault:
      o.boolean('optimize_for_inference') === undefined &&
      engine.optimizeForInference === undefined,
    mapLocation: o.boolean('mapLocation') ?? true,
    extraFiles: (o.string('extraFiles') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    warmup: o.string('warmup'),
    warmupIterations: o.integer('warmup_iterations') ?? 2,
  };
}

/** Engine options from the environment (`KILN_PYTORCH_NUM_THREADS`…), for the default provider. */
export function engineOptionsFromEnv(
  env: Readonly<Record<string, string | undefined>> = process.env,
): LibTorchEngineOptions {
  const read: Record<string, string> = {};
  for (const key of ENGINE_WIDE_KEYS) {
    const value = env[`KILN_PYTORCH_${key.toUpperCase()}`];
    if (value !== undefined && value.trim() !== '') read[key] = value;
  }
  const settings = resolveModelSettings(read);
  return {
    numThreads: read.num_threads === undefined ? undefined : settings.numThreads,
    numInteropThreads: settings.numInteropThreads,
    graphOptimizer: read.graph_optimizer === undefined ? undefined : settings.graphOptimizer,
    useMkldnn: settings.useMkldnn,
    useCudnn: settings.useCudnn,
    cudnnBenchmark: settings.cudnnBenchmark,
    optimizeForInference:
      read.optimize_for_inference === undefined ? undefined : settings.optimizeForInference,
  };
}
