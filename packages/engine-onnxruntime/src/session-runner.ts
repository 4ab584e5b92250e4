import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KilnError, KilnErrorCode, NDList, type TensorDescriptor, bindInputs } from '@kiln/core';
import type { InferenceSession, Tensor as OrtTensor } from 'onnxruntime-node';
import { namesWithoutShape } from './declared-shapes.js';
import { NEW_KV_OUTPUT_PREFIX } from './decoder/new-kv-outputs.js';
import { providerProblem } from './execution-providers.js';

import { type OrtModule, loadOrt } from './ort-loader.js';
import { fromOrtTensor, toDescriptor, toOrtTensor } from './ort-tensors.js';
import { type OrtProfile, readProfileTrace } from './profiling/ort-profile.js';
import { type OrtSessionConfig, toSessionOptions } from './options.js';
import { type WeightSharing, openSession } from './shared-weights.js';

/** When ONNX Runtime itself ran, measured on the session's thread (no queueing). */
export interface RunTiming {
  /** Start, in milliseconds since the epoch (comparable across threads). */
  readonly startedAt: number;
  readonly runMs: number;
}

/**
 * One ONNX Runtime session. `run` blocks the calling thread while the model computes
 * (onnxruntime-node runs synchronously): the worker pool runs it on a thread of its own.
 */
export class SessionRunner {
  private profilingOpen: boolean;
  private readonly outputNames: readonly string[];

  private constructor(
    private readonly ort: OrtModule,
    private readonly session: InferenceSession,
    readonly inputs: readonly TensorDescriptor[],
    readonly outputs: readonly TensorDescriptor[],
    /**
     * Outputs Kiln added to the model for its own use (a decoder's new positions, see
     * withNewKvOutputs): fetched only when a run names them, never described.
     */
    readonly addedOutputs: readonly TensorDescriptor[],
    private readonly profileDir: string | undefined,
    /** Whether the weights are the process's shared copy, or why not. */
    readonly weightSharing: WeightSharing,
    /**
     * What the session holds on to: the shared bytes ORT reads the weights from in place, kept
     * alive with it, and what to give back when it is released (a claim on an own copy).
     */
    private held:
      { weights?: ArrayBuffer | undefined; release?: (() => void) | undefined } | undefined,
  ) {
    this.profilingOpen = profileDir !== undefined;
    this.outputNames = outputs.map((d) => d.name);
  }

  static async create(modelPath: string, config: OrtSessionConfig): Promise<SessionRunner> {
    const ort = await loadOrt();
    const problem = providerProblem(ort, config.ortDevice);
    if (problem)
      throw new KilnError(
        KilnErrorCode.EngineUnavailable,
        `OnnxRuntime cannot run on ${config.ortDevice}: ${problem}`,
      );
    if (!existsSync(modelPath))
      throw new KilnError(KilnErrorCode.ModelNotFound, `model file ${modelPath} does not exist`);
    // ORT writes traces to the working directory unless the prefix is absolute.
    const profileDir = config.profiling
      ? await mkdtemp(join(tmpdir(), 'kiln-ort-profile-'))
      : undefined;
    let opened: Awaited<ReturnType<typeof openSession>>;
    try {
      opened = await openSession(
        ort,
        modelPath,
        config,
        toSessionOptions(config, profileDir && join(profileDir, 'ort')),
      );
    } catch (error) {
      if (profileDir) await rm(profileDir, { recursive: true, force: true });
      throw loadError(error, modelPath, config);
    }
    const { session, weights, sharing, release } = opened;
    try {
      const added = (m: { name: string }) => m.name.startsWith(NEW_KV_OUTPUT_PREFIX);
      const metadata = [...session.inputMetadata, ...session.outputMetadata].filter(
        (m) => !added(m),
      );
      // ORT reports "no shape declared" as [], like a scalar: only the model file tells.
      const unshaped = metadata.some((m) => m.isTensor && m.shape.length === 0)
        ? namesWithoutShape(await readFile(modelPath))
        : new Set<string>();
      const inputs = session.inputMetadata.map((m) => toDescriptor(m, 'input', unshaped));
      const outputs = session.outputMetadata.map((m) => toDescriptor(m, 'output', unshaped));
      return new SessionRunner(
        ort,
        session,
        inputs,
        outputs.filter((d) => !added(d)),
        outputs.filter(added),
        profileDir,
        sharing,
        { weights, release },
      );
    } catch (error) {
      await session.release();
      release?.();
      if (profileDir) await rm(profileDir, { recursive: true, force: true });
      throw error;
    }
  }

  /**
   * Runs the model once, handing back the described outputs or, when `fetch` names them,
   * those (added outputs included). Inputs are checked first; ORT failures become
   * ENGINE_ERROR.
   */
  async run(
    input: NDList,
    fetch?: readonly string[],
  ): Promise<{ output: NDList; timing: RunTiming }> {
    const tensors = bindInputs(input, this.inputs);
    const feeds: Record<string, OrtTensor> = {};
    this.inputs.forEach((d, i) => (feeds[d.name] = toOrtTensor(this.ort, tensors[i]!)));
    const names = fetch ?? this.outputNames;
    let results: InferenceSession.ReturnType;
    const start = performance.now();
    try {
      // Named, so that ORT leaves the added outputs in place rather than copying them out.
      results = await this.session.run(feeds, names);
    } catch (error) {
      throw KilnError.wrap(error, KilnErrorCode.EngineError, 'OnnxRuntime run failed');
    }
    const timing = { startedAt: performance.timeOrigin + start, runMs: performance.now() - start };
    const output = new NDList(names.map((name) => fromOrtTensor(name, results[name] as OrtTensor)));
    return { output, timing };
  }

  /** Stops profiling and returns the per-node table of the runs so far. Once per session. */
  async endProfiling(options: { skipRuns?: number } = {}): Promise<OrtProfile> {
    if (!this.profileDir) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        'profiling is off for this model: load it with option.profiling=true',
      );
    }
    if (!this.profilingOpen)
      throw new KilnError(KilnErrorCode.InvalidConfig, 'profiling already ended for this session');
    this.profilingOpen = false;
    this.session.endProfiling();
    return readProfileTrace(this.profileDir, options);
  }

  async close(): Promise<void> {
    await this.session.release();
    this.held?.release?.();
    this.held = undefined;
    if (this.profileDir) await rm(this.profileDir, { recursive: true, force: true });
  }
}

function loadError(error: unknown, modelPath: string, config: OrtSessionConfig): KilnError {
  const message = error instanceof Error ? error.message : String(error);
  if (/Unsupported data type: 16\b/.test(message)) {
    return new KilnError(
      KilnErrorCode.UnsupportedDType,
      `${modelPath} uses bfloat16 inputs or outputs, which onnxruntime-node cannot exchange`,
      {
        cause: error,
      },
    );
  }
  if (config.ortDevice !== 'cpu') {
    return new KilnError(
      KilnErrorCode.EngineUnavailable,
      `OnnxRuntime could not start ${config.ortDevice}: ${message}`,
      { cause: error },
    );
  }
  return new KilnError(
    KilnErrorCode.ModelLoadFailed,
    `OnnxRuntime could not load ${modelPath}: ${message}`,
    { cause: error },
  );
}
