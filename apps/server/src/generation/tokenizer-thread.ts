import type { Worker, WorkerOptions } from 'node:worker_threads';
import { KilnError, KilnErrorCode, siblingModule } from '@kiln/core';
import type {
  StreamToken,
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

/** One generation's text, token after token, decoded on the tokenizer's thread. */
export interface TokenTextStreamHandle {
  /** The text this token completes ('' while a UTF-8 character is still split). */
  push(token: number): Promise<string>;
  /** Forgets the stream on the thread; call once the generation is over. */
  end(): void;
}

/**
 * A model's tokenizer on a worker thread of its own: encoding a long prompt (seconds for a
 * byte-level BPE at a megabyte) and decoding generated tokens never hold the event loop. The
 * tokens of every stream chosen in one scheduler step go to the thread as one message.
 */
export class TokenizerThread {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private nextStream = 1;
  private batch: { token: StreamToken; resolve(text: string): void; reject(e: unknown): void }[] =
    [];
  private failure: KilnError | undefined;
  private closed = false;

  private constructor(
    private readonly worker: Worker,
    readonly vocabSize: number,
    readonly eosTokenId: number | undefined,
  ) {
    worker.on('message', (reply: TokenizerReply) => this.settle(reply));
    worker.on('exit', (code) => this.exited(code));
    worker.unref();
  }

  /** Starts a thread with the tokenizer of the model folder `dir` (see loadTextTokenizer). */
  static async start(
    dir: string,
    startThread: (module: URL, options: WorkerOptions) => Worker,
  ): Promise<TokenizerThread> {
    const data: TokenizerWorkerData = { dir };
    const worker = startThread(TOKENIZER_WORKER_MODULE, { workerData: data });
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
    return new TokenizerThread(worker, ready.vocabSize, ready.eosTokenId);
  }

  async encode(text: string): Promise<number[]> {
    const reply = await this.request((id) => ({ type: 'encode', id, text }));
    if (reply.type !== 'encoded') throw unexpected(reply);
    return Array.from(reply.tokens);
  }

  /** A fresh stream for one generation's tokens. */
  stream(): TokenTextStreamHandle {
    const stream = this.nextStream++;
    return {
      push: (token) =>
        new Promise<string>((resolve, reject) => {
          if (this.batch.length === 0) queueMicrotask(() => this.sendBatch());
          this.batch.push({ token: { stream, token }, resolve, reject });
        }),
      end: () => this.post({ type: 'end', stream }),
    };
  }

  /** Ends the thread; what still waits on it fails with CLOSED. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.worker.terminate();
  }

  private sendBatch(): void {
    const batch = this.batch;
    this.batch = [];
    this.request((id) => ({ type: 'decode', id, tokens: batch.map((b) => b.token) }))
      .then((reply) => {
        if (reply.type !== 'decoded') throw unexpected(reply);
        return reply.texts;
      })
      .then(
        (texts) => batch.forEach((b, i) => b.resolve(texts[i]!)),
        (error: unknown) => batch.forEach((b) => b.reject(error)),
      );
  }

  private request(message: (id: number) => TokenizerRequest): Promise<TokenizerReply> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.closed)
      return Promise.reject(new KilnError(KilnErrorCode.Closed, 'the model is unloading'));
    const id = this.nextId++;
    return new Promise<TokenizerReply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.post(message(id));
    });
  }

  private post(message: TokenizerRequest): void {
    if (!this.closed && !this.failure) this.worker.postMessage(message);
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

function unexpected(reply: TokenizerReply): KilnError {
  return new KilnError(KilnErrorCode.Internal, `unexpected ${reply.type} from a tokenizer`);
}
