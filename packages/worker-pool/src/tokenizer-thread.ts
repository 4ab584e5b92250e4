import type { Worker } from 'node:worker_threads';
import {
  type ChatMessage,
  type GenerationDefaults,
  KilnError,
  KilnErrorCode,
  type ResponseFormat,
  siblingModule,
} from '@kiln/core';
import { startInferenceThread } from './inference-threads.js';
import type {
  ChatTemplateInfo,
  TokenizerFacts,
  TokenizerReply,
  TokenizerRequest,
  TokenizerWorkerData,
} from './tokenizer-protocol.js';

// The thread's own module beside this one: .ts when run from source, .js when built.
const TOKENIZER_WORKER_MODULE = siblingModule(import.meta.url, './tokenizer-worker');

interface Pending {
  resolve(reply: TokenizerReply): void;
  reject(error: KilnError): void;
}

/**
 * A model's tokenizer on a worker thread of its own: encoding a long prompt (seconds for a
 * byte-level BPE at a megabyte) or rendering a chat never holds the event loop. A generation
 * pool owns one for its prompts; its step workers detokenize their own output. It also tells
 * what the folder says of generation: end tokens, generation_config.json's defaults, and
 * whether there is a chat template.
 */
export class TokenizerThread {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failure: KilnError | undefined;
  private closed = false;

  readonly vocabSize: number;
  readonly eosTokenId: number | undefined;
  readonly eosTokenIds: readonly number[];
  readonly generationDefaults: GenerationDefaults;
  readonly chatTemplate: ChatTemplateInfo | undefined;

  private constructor(
    private readonly worker: Worker,
    facts: TokenizerFacts,
  ) {
    this.vocabSize = facts.vocabSize;
    this.eosTokenId = facts.eosTokenId;
    this.eosTokenIds = facts.eosTokenIds;
    this.generationDefaults = facts.generationDefaults;
    this.chatTemplate = facts.chatTemplate;
    worker.on('message', (reply: TokenizerReply) => this.settle(reply));
    worker.on('exit', (code) => this.exited(code));
    worker.unref();
  }

  /** Starts a thread with the tokenizer of the model folder `dir` (see loadTextTokenizer). */
  static async start(dir: string): Promise<TokenizerThread> {
    const data: TokenizerWorkerData = { dir };
    const worker = startInferenceThread(TOKENIZER_WORKER_MODULE, { workerData: data });
    const ready = await new Promise<Extract<TokenizerReply, { type: 'ready' }>>(
      (resolve, reject) => {
        worker.once('message', (reply: TokenizerReply) => {
          worker.removeAllListeners('exit');
          if (reply.type === 'ready') return resolve(reply);
          void worker.terminate();
          reject(
            reply.type === 'start-failed'
              ? KilnError.fromJSON(reply.error)
              : new KilnError(KilnErrorCode.Internal, `unexpected ${reply.type} from a tokenizer`),
          );
        });
        worker.once('exit', (code) =>
          reject(
            new KilnError(
              KilnErrorCode.WorkerCrashed,
              `tokenizer thread exited with ${code} while starting`,
            ),
          ),
        );
      },
    );
    const { type: _, ...facts } = ready;
    return new TokenizerThread(worker, facts);
  }

  /** The token ids of `text`, with the tokenizer's special tokens. */
  encode(text: string): Promise<number[]> {
    return this.request({ type: 'encode', id: this.nextId++, text });
  }

  /**
   * The token ids of a chat as the model's template writes it, ending with the start of the
   * assistant's turn; `tools` go to the template. INVALID_INPUT when the model has no
   * template, or the template refuses the messages.
   */
  encodeChat(messages: readonly ChatMessage[], tools?: readonly unknown[]): Promise<number[]> {
    return this.request({
      type: 'chat',
      id: this.nextId++,
      messages,
      ...(tools === undefined ? {} : { tools }),
    });
  }

  /** INVALID_INPUT (naming why) when a response format cannot be compiled. */
  async checkResponseFormat(format: ResponseFormat): Promise<void> {
    await this.request({ type: 'check-format', id: this.nextId++, format });
  }

  private async request(request: TokenizerRequest): Promise<number[]> {
    if (this.failure) throw this.failure;
    if (this.closed) throw new KilnError(KilnErrorCode.Closed, 'the model is unloading');
    const reply = await new Promise<TokenizerReply>((resolve, reject) => {
      this.pending.set(request.id, { resolve, reject });
      this.worker.postMessage(request);
    });
    if (reply.type !== 'encoded')
      throw new KilnError(KilnErrorCode.Internal, `unexpected ${reply.type} from a tokenizer`);
    return Array.from(reply.tokens);
  }

  /** Ends the thread; what still waits on it fails with CLOSED. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.worker.terminate();
  }

  private settle(reply: TokenizerReply): void {
    if (!('id' in reply)) return;
    const pending = this.pending.get(reply.id);
    if (!pending) return;
    this.pending.delete(reply.id);
    if (reply.type === 'failed') pending.reject(KilnError.fromJSON(reply.error));
    else pending.resolve(reply);
  }

  private exited(code: number): void {
    this.failure = this.closed
      ? new KilnError(KilnErrorCode.Closed, 'the model is unloading')
      : new KilnError(KilnErrorCode.WorkerCrashed, `the tokenizer thread exited (code ${code})`);
    for (const pending of this.pending.values()) pending.reject(this.failure);
    this.pending.clear();
  }
}
