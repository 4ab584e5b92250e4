import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Worker, WorkerOptions } from 'node:worker_threads';
import {
  KilnError,
  KilnErrorCode,
  type StepDecoder,
  type StepEntry,
  siblingModule,
} from '@kiln/core';
import { type OrtSessionConfig, DEFAULT_SESSION_CONFIG } from '../options.js';
import type { DecoderSignature } from './decoder-signature.js';
import type { DecoderReply, DecoderRequest, DecoderWorkerData } from './decoder-protocol.js';

// The worker's own module beside this one: .ts when run from source, .js when built.
export const DECODER_WORKER_MODULE = siblingModule(import.meta.url, './decoder-worker');

export interface OrtStepDecoderOptions {
  /**
   * Starts the thread that keeps the session and the caches: the worker pool's
   * `startInferenceThread` (threads are the pool's to start, not the engine's).
   */
  readonly startThread: (module: URL, options: WorkerOptions) => Worker;
  /** Session settings; the session runs on the decoder's thread. */
  readonly session?: Partial<OrtSessionConfig>;
  /**
   * Longest sequence the model takes; default `n_positions` (or `max_position_embeddings`)
   * from the folder's Hugging Face `config.json`.
   */
  readonly maxSequenceLength?: number;
  /** Model file inside the folder; default `model.onnx`. */
  readonly modelFile?: string;
  /**
   * What one more decode run costs, in padded cache positions (rows × positions): decode
   * rows run in groups of similar past length where padding them together would cost more.
   * Default: estimated from the model file's size and the cache's width; Infinity keeps
   * every decode step one run.
   */
  readonly decodeRunCost?: number;
}

/** One sequence's handle; its cache lives on the decoder's thread. */
export interface DecoderSequence {
  readonly id: number;
  /** Positions cached so far. */
  length: number;
}

/** What a decoder's `config.json` may say (Hugging Face names). */
interface HfConfig {
  readonly n_positions?: number;
  readonly max_position_embeddings?: number;
  readonly eos_token_id?: number;
}

interface Pending {
  resolve(reply: DecoderReply): void;
  reject(error: KilnError): void;
}

/**
 * A GPT-2-style ONNX decoder run one step at a time for many sequences (see KvBatchRunner).
 * The session and every sequence's KV cache live on a worker thread of their own, so the
 * event loop stays free during steps and only token ids and logits cross threads.
 */
export class OrtStepDecoder implements StepDecoder<DecoderSequence> {
  readonly vocabSize: number;
  readonly cacheBytesPerToken: number;
  private readonly pending = new Map<number, Pending>();
  private readonly live = new Set<DecoderSequence>();
  private nextId = 1;
  private nextSequence = 1;
  private failure: KilnError | undefined;
  private closed = false;
  private allocatedFloats = 0;
  /** Time the last step took on the decoder's thread: ONNX Runtime and the caches' copying. */
  lastStepMs = 0;
  /** ONNX Runtime's share of `lastStepMs`. */
  lastSessionMs = 0;

  private constructor(
    private readonly worker: Worker,
    readonly signature: DecoderSignature,
    readonly maxSequenceLength: number,
    /** From config.json, when it says. */
    readonly eosTokenId: number | undefined,
  ) {
    this.vocabSize = signature.vocabSize;
    this.cacheBytesPerToken = signature.layers * 2 * signature.heads * signature.headSize * 4;
    worker.on('message', (reply: DecoderReply) => this.settle(reply));
    worker.on('exit', (code) => this.exited(code));
    worker.unref();
  }

  static async load(dir: string, options: OrtStepDecoderOptions): Promise<OrtStepDecoder> {
    const config = await readHfConfig(dir);
    const maxSequenceLength =
      options.maxSequenceLength ?? config.n_positions ?? config.max_position_embeddings;
    if (!maxSequenceLength)
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        "the decoder's longest sequence is unknown: set n_positions in config.json",
      );
    const data: DecoderWorkerData = {
      modelPath: join(dir, options.modelFile ?? 'model.onnx'),
      config: { ...DEFAULT_SESSION_CONFIG, ...options.session },
      maxSequenceLength,
      ...(options.decodeRunCost === undefined ? {} : { decodeRunCost: options.decodeRunCost }),
    };
    const worker = options.startThread(DECODER_WORKER_MODULE, { workerData: data });
    const signature = await new Promise<DecoderSignature>((resolve, reject) => {
      worker.once('message', (reply: DecoderReply) => {
        worker.removeAllListeners('exit');
        if (reply.type === 'ready') return resolve(reply.signature);
        void worker.terminate();
        reject(
          reply.type === 'start-failed'
            ? KilnError.fromJSON(reply.error)
            : new KilnError(KilnErrorCode.Internal, `unexpected ${reply.type} from a decoder`),
        );
      });
      worker.once('exit', (code) =>
        reject(
          new KilnError(
            KilnErrorCode.WorkerCrashed,
            `decoder worker exited with ${code} while starting`,
          ),
        ),
      );
    });
    return new OrtStepDecoder(worker, signature, maxSequenceLength, config.eos_token_id);
  }

  /** Bytes the caches hold on the decoder's thread, spare capacity included (as of the last step). */
  get cacheBytesAllocated(): number {
    return this.allocatedFloats * 4;
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
    if (!this.live.delete(state)) return;
    if (!this.failure && !this.closed) this.post({ type: 'release', sequence: state.id });
  }

  async step(entries: readonly StepEntry<DecoderSequence>[]): Promise<readonly Float32Array[]> {
    for (const { state, tokens } of entries) {
      if (state.length + tokens.length > this.maxSequenceLength)
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `a sequence would exceed the model's ${this.maxSequenceLength} positions`,
        );
    }
    const reply = await this.request({
      type: 'step',
      id: this.nextId++,
      entries: entries.map(({ state, tokens }) => ({ id: state.id, tokens: [...tokens] })),
    });
    if (reply.type !== 'logits') throw new KilnError(KilnErrorCode.Internal, 'unexpected reply');
    this.allocatedFloats = reply.allocatedFloats;
    this.lastStepMs = reply.runMs;
    this.lastSessionMs = reply.sessionMs;
    const vocab = this.vocabSize;
    return entries.map(({ state, tokens }, i) => {
      state.length += tokens.length;
      return reply.logits.subarray(i * vocab, (i + 1) * vocab);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.live.clear();
    if (!this.failure) {
      await this.request({ type: 'close', id: this.nextId++ }, true).catch(() => undefined);
    }
    await this.worker.terminate();
  }

  private post(message: DecoderRequest): void {
    this.worker.postMessage(message);
  }

  private request(
    message: DecoderRequest & { id: number },
    closing = false,
  ): Promise<DecoderReply> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.closed && !closing)
      return Promise.reject(new KilnError(KilnErrorCode.Closed, 'the decoder is closed'));
    return new Promise((resolve, reject) => {
      this.pending.set(message.id, { resolve, reject });
      this.worker.ref();
      this.post(message);
    });
  }

  private settle(reply: DecoderReply): void {
    if (!('id' in reply)) return;
    const pending = this.pending.get(reply.id);
    if (!pending) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.worker.unref();
    if (reply.type === 'failed') pending.reject(KilnError.fromJSON(reply.error));
    else pending.resolve(reply);
  }

  private exited(code: number): void {
    this.failure = this.closed
      ? new KilnError(KilnErrorCode.Closed, 'the decoder is closed')
      : new KilnError(
          KilnErrorCode.WorkerCrashed,
          `decoder worker exited unexpectedly with code ${code}`,
        );
    for (const pending of this.pending.values()) pending.reject(this.failure);
    this.pending.clear();
  }
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
