import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { KilnError, KilnErrorCode, type StepDecoder, type StepEntry } from '@kiln/core';
import { type OrtSessionConfig, DEFAULT_SESSION_CONFIG } from '../options.js';
import { modelFileBytes } from '../model-file.js';
import { SessionRunner } from '../session-runner.js';
import { findTransformersJsFile } from '../transformers-js-file.js';
import {
  type DecoderSignature,
  type DecoderSizeHints,
  readDecoderSignature,
} from './decoder-signature.js';
import { KvBatchRunner } from './kv-batch-runner.js';
import { openServed } from './new-kv-model-file.js';
import { newKvOutputName } from './new-kv-outputs.js';
import { DecodeRunCosts, decodeRunCost } from './run-costs.js';

/** What a decoder's folder and file do not say, or what overrides it. */
export interface DecoderLimits {
  /**
   * Longest sequence the model takes; default `n_positions` (or `max_position_embeddings`)
   * from the folder's Hugging Face `config.json`.
   */
  readonly maxSequenceLength?: number;
  /**
   * What one more decode run costs, in padded cache positions (rows × positions): the rolling
   * loop runs decode rows in groups of similar past length where padding them together would
   * cost more.
   * Default: learned from the decode runs' own times (DecodeRunCosts), estimated from the model
   * file's size and the cache's width until they say; Infinity keeps every decode step one run.
   */
  readonly decodeRunCost?: number;
}

export interface OrtStepDecoderOptions extends DecoderLimits {
  /** Session settings (defaults: DEFAULT_SESSION_CONFIG). */
  readonly session?: Partial<OrtSessionConfig>;
  /**
   * Model file inside the folder; default `model.onnx`, or in a transformers.js folder
   * (no model.onnx at its top) `onnx/model.onnx` or the file for `dtype`.
   */
  readonly modelFile?: string;
  /**
   * transformers.js's dtype (fp32, fp16, q8, q4…): which `onnx/model{suffix}.onnx` to load,
   * e.g. q8 → `onnx/model_quantized.onnx`. Default fp32.
   */
  readonly dtype?: string;
}

/** One sequence's handle; its cache lives in the decoder. */
export interface DecoderSequence {
  readonly id: number;
  /** Positions cached so far. */
  length: number;
}

/** What a decoder's `config.json` may say (Hugging Face names). */
interface HfConfig extends DecoderSizeHints {
  readonly n_positions?: number;
  readonly max_position_embeddings?: number;
  readonly eos_token_id?: number | readonly number[];
}

/**
 * A GPT-2-style ONNX decoder run one step at a time for many sequences (see KvBatchRunner).
 * The session and every sequence's KV cache live in the calling thread: a step worker's
 * thread, so that only token ids go in and logits stay beside the sampler. A step blocks
 * that thread while ONNX Runtime computes.
 */
export class OrtStepDecoder implements StepDecoder<DecoderSequence> {
  readonly vocabSize: number;
  readonly cacheBytesPerToken: number;
  private readonly batches: KvBatchRunner;
  private readonly live = new Set<DecoderSequence>();
  private nextSequence = 1;
  /** Steps and the close run one after another, never interleaved at their awaits. */
  private queue: Promise<unknown> = Promise.resolve();
  private closing: Promise<void> | undefined;
  private sessionMs = 0;
  /** Time the last step took: ONNX Runtime and the caches' copying around it. */
  lastStepMs = 0;
  /** ONNX Runtime's share of `lastStepMs`. */
  lastSessionMs = 0;

  constructor(
    private readonly session: SessionRunner,
    readonly signature: DecoderSignature,
    readonly maxSequenceLength: number,
    /** From config.json, when it says. */
    readonly eosTokenId: number | undefined,
    runCost: number | DecodeRunCosts,
    /** Called once the session is closed. */
    private readonly onClose: (decoder: OrtStepDecoder) => void = () => undefined,
  ) {
    this.vocabSize = signature.vocabSize;
    this.cacheBytesPerToken = cacheBytesPerToken(signature);
    this.batches = new KvBatchRunner(
      async (inputs, fetch) => {
        const { output, timing } = await session.run(inputs, fetch);
        this.sessionMs += timing.runMs;
        return output;
      },
      signature,
      maxSequenceLength,
      runCost,
    );
  }

  /**
   * What one more decode run is taken to cost now, in padded positions (see DecoderLimits'
   * decodeRunCost): the rolling loop weighs it when it groups decode rows.
   */
  get decodeRunCost(): number {
    return this.batches.runCost;
  }

  /** Bytes the caches hold, spare capacity and padding included. */
  get cacheBytesAllocated(): number {
    return this.batches.allocatedValues * bytesOf(this.signature);
  }

  /** Positions cached over all live sequences. */
  get cachedTokens(): number {
    let tokens = 0;
    for (const s of this.live) tokens += s.length;
    return tokens;
  }

  open(): DecoderSequence {
    const sequence = { id: this.nextSequence++, length: 0 };
    this.live.add(sequence);
    return sequence;
  }

  release(state: DecoderSequence): void {
    if (this.live.delete(state)) this.batches.release(state.id);
  }

  step(entries: readonly StepEntry<DecoderSequence>[]): Promise<readonly Float32Array[]> {
    if (this.closing)
      return Promise.reject(new KilnError(KilnErrorCode.Closed, 'the decoder is closed'));
    for (const { state, tokens } of entries) {
      if (state.length + tokens.length > this.maxSequenceLength)
        return Promise.reject(
          new KilnError(
            KilnErrorCode.InvalidInput,
            `a sequence would exceed the model's ${this.maxSequenceLength} positions`,
          ),
        );
    }
    const step = this.queue.then(() => this.run(entries));
    this.queue = step.catch(() => undefined);
    return step;
  }

  close(): Promise<void> {
    this.closing ??= this.queue.then(async () => {
      this.live.clear();
      await this.session.close().finally(() => this.onClose(this));
    });
    return this.closing;
  }

  private async run(entries: readonly StepEntry<DecoderSequence>[]): Promise<Float32Array[]> {
    const started = performance.now();
    this.sessionMs = 0;
    let rows: Float32Array[];
    try {
      rows = await this.batches.step(
        entries.map(({ state, tokens, run }) => ({ id: state.id, tokens, run })),
      );
    } catch (error) {
      // A failed step leaves its sequences' caches unusable; the owner retires them.
      for (const { state } of entries) this.batches.release(state.id);
      throw KilnError.wrap(error, KilnErrorCode.EngineError);
    }
    this.lastStepMs = performance.now() - started;
    this.lastSessionMs = this.sessionMs;
    for (const { state, tokens } of entries) state.length += tokens.length;
    return rows;
  }
}

/** Opens `dir`'s model file in a session of its own and makes a decoder of it. */
export async function loadOrtStepDecoder(
  dir: string,
  options: OrtStepDecoderOptions = {},
): Promise<OrtStepDecoder> {
  const modelPath = await decoderModelFile(dir, options);
  const config = { ...DEFAULT_SESSION_CONFIG, ...options.session };
  const { opened: session, served } = await openServed(
    modelPath,
    config.optimizedModelCache,
    (path) => SessionRunner.create(path, config),
  );
  const modelBytes = await modelFileBytes(modelPath);
  return createOrtStepDecoder(session, { ...options, dir, modelBytes }, () => {
    void served.release();
  }).catch(async (error: unknown) => {
    await served.release();
    throw error;
  });
}

/** Where a decoder's session came from. */
export interface DecoderSource extends DecoderLimits {
  /** The model's folder: its config.json says the limits. */
  readonly dir: string;
  /** The model file's size, for the default decodeRunCost. */
  readonly modelBytes: number;
}

/**
 * A decoder over an open session; it owns the session from then on, and closes it when the
 * session is not a decoder's.
 */
export async function createOrtStepDecoder(
  session: SessionRunner,
  source: DecoderSource,
  onClose?: (decoder: OrtStepDecoder) => void,
): Promise<OrtStepDecoder> {
  try {
    const config = await readHfConfig(source.dir);
    const read = readDecoderSignature(session.inputs, session.outputs, config);
    const added = new Set(session.addedOutputs.map((d) => d.name));
    const signature = {
      ...read,
      newKvOutputs: Array.from({ length: read.layers }, (_, layer) => layer).every(
        (layer) =>
          added.has(newKvOutputName(layer, 'key')) && added.has(newKvOutputName(layer, 'value')),
      ),
    };
    const maxSequenceLength =
      source.maxSequenceLength ?? config.n_positions ?? config.max_position_embeddings;
    if (!maxSequenceLength)
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        "the decoder's longest sequence is unknown: set n_positions in config.json",
      );
    // A list of end tokens (newer configs) keeps its first.
    const eos = [config.eos_token_id].flat()[0];
    // Set, it holds; by default it is learned from the decode runs, estimated until then.
    const runCost =
      source.decodeRunCost ??
      new DecodeRunCosts(decodeRunCost(source.modelBytes, cacheBytesPerToken(signature)));
    return new OrtStepDecoder(session, signature, maxSequenceLength, eos, runCost, onClose);
  } catch (error) {
    await session.close();
    throw error;
  }
}

/** The decoder's file: `modelFile` when named, else `model.onnx` or a transformers.js file. */
async function decoderModelFile(dir: string, options: OrtStepDecoderOptions): Promise<string> {
  if (options.modelFile) return join(dir, options.modelFile);
  const plain = join(dir, 'model.onnx');
  if (options.dtype === undefined && (await isFile(plain))) return plain;
  const file = await findTransformersJsFile(dir, options.dtype);
  if (file) return file;
  throw new KilnError(
    KilnErrorCode.ModelNotFound,
    options.dtype === undefined
      ? `${dir} has neither model.onnx nor onnx/model.onnx`
      : `option.dtype needs the model in ${dir}/onnx/, as transformers.js keeps it`,
  );
}

async function isFile(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isFile() ?? false;
}

function cacheBytesPerToken(signature: DecoderSignature): number {
  const { layers, heads, headSize } = signature;
  return layers * 2 * heads * headSize * bytesOf(signature);
}

/** Bytes of one cached value. */
function bytesOf({ cacheType }: DecoderSignature): number {
  return cacheType === 'float16' ? 2 : 4;
}

async function readHfConfig(dir: string): Promise<HfConfig> {
  let text: string;
  try {
    text = await readFile(join(dir, 'config.json'), 'utf8');
  } catch {
    return {};
  }
  try {
    return JSON.parse(text) as HfConfig;
  } catch (error) {
    throw new KilnError(KilnErrorCode.InvalidConfig, 'config.json is not valid JSON', {
      cause: error,
    });
  }
}
