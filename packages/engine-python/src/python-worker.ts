import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Readable, Writable } from 'node:stream';
import { KilnError, KilnErrorCode } from '@kiln/core';
import {
  type Content,
  type Frame,
  type FrameProperties,
  FrameKind,
  FrameReader,
  FrameTooLargeError,
  decodeFrame,
  encodeFrame,
  encodeFrameParts,
} from './frames.js';
import { SharedRegion } from './shared-region.js';

/** The Python package shipped with this adapter (kiln_python and djl_python). */
export const PYTHON_PACKAGE_DIR = fileURLToPath(new URL('../python', import.meta.url));

export interface PythonWorkerOptions {
  readonly modelName: string;
  readonly modelDir: string;
  readonly pythonExecutable: string;
  readonly entryPoint: string;
  readonly handler: string;
  /** DJL's `device_id` handed to every call: a GPU's index, or `-1` for the CPU. */
  readonly deviceId: string;
  /** Properties of the init call (DJL hands the model's serving.properties to initialize()). */
  readonly initProperties?: Readonly<Record<string, string>>;
  /** Milliseconds for each call (the init call's are the pool's start timeout's). */
  readonly predictTimeoutMs: number;
  /** Added to the process's environment (`option.env`). */
  readonly env?: Readonly<Record<string, string>>;
  /** Where the worker's stdout/stderr lines go. */
  readonly log?: (line: string) => void;
  /** Large contents through shared memory (default); false sends every byte over the socket. */
  readonly sharedMemory?: boolean;
  /**
   * Bytes one request's answer may hold (max_response_size; a batch's answer, that many per
   * request). The worker refuses a larger answer itself; Node refuses a frame that announces
   * more before reading it, and the worker ends.
   */
  readonly maxResponseBytes?: number;
  /** Resident memory past which the worker ends after its call (max_worker_rss_mb). */
  readonly maxRssBytes?: number;
}

export interface CallOptions {
  /** Milliseconds for the call (default: predictTimeoutMs). */
  readonly timeoutMs?: number;
  /** Requests the call holds (a batch's size), for the answer's size limit. */
  readonly requests?: number;
  /** Cancels the call: the handler is interrupted, or its worker killed when it goes on. */
  readonly signal?: AbortSignal;
  /**
   * Takes each chunk of a streamed answer; the worker produces the next once a promise it
   * returns settles. Each chunk restarts the call's timeout. Without it chunks are dropped.
   */
  readonly onChunk?: (chunk: Frame) => void | Promise<void>;
}

/** Framing a frame adds to its properties and contents (headers, names, alignment). */
const FRAME_ALLOWANCE = 64 * 1024;

/** How long an interrupted handler has to return before its worker is killed. */
export const CANCEL_GRACE_MS = 2000;

interface Pending {
  resolve(frame: Frame): void;
  reject(error: KilnError): void;
  /** performance.now() past which the call has timed out. */
  deadline: number;
  timeoutMs: number;
  /** Whether the call's contents occupy the shared input region. */
  shared: boolean;
  /** Bytes its answer's frame may announce. */
  responseLimit: number;
  /** Set once the call is cancelled: what it rejects with, and the timer that kills the worker. */
  cancelled?: { readonly error: KilnError; readonly timer: NodeJS.Timeout };
  /** Stops listening to the call's signal. */
  unlisten?: () => void;
  onChunk?: ((chunk: Frame) => void | Promise<void>) | undefined;
}

/**
 * One Python process running model.py. Calls are framed over fd 3 (to Python) and fd 4 (back),
 * keyed by request id, so a crash fails exactly the calls in flight and nothing else. A worker
 * that dies, is killed (timeout, cancel, unreadable answer) or passes max_worker_rss_mb is not
 * replaced here: `died` tells its owner (the worker pool replaces it).
 */
export class PythonWorker {
  private readonly child: ChildProcess;
  private readonly requests: Writable;
  private readonly pending = new Map<number, Pending>();
  /** One timer for every call's deadline, armed for the earliest: no timer per call. */
  private watchdog: NodeJS.Timeout | undefined;
  private watchdogAt = Infinity;
  private nextId = 1;
  private exitError: KilnError | undefined;
  private readonly log: (line: string) => void;
  /** Set by close(): an exit asked for is no death. */
  private closing = false;
  /** Large contents go through this memory; undefined when it could not be set up. */
  private readonly region: SharedRegion | undefined;
  /** Large contents of answers come back through this one. */
  private readonly answers: SharedRegion | undefined;
  /** Why there is no shared input region, when there is none. */
  readonly sharedInputProblem: string | undefined;
  readonly exited: Promise<void>;
  /** What the last call wrote: bytes to the socket (one writev), bytes into shared memory. */
  lastCallWrites = { socketBytes: 0, sharedBytes: 0 };
  /**
   * Resolves with why the worker can take no more calls, as soon as that is known (before its
   * process has exited); never, when it was closed.
   */
  readonly died: Promise<KilnError>;
  private resolveDied!: (error: KilnError) => void;

  private constructor(private readonly options: PythonWorkerOptions) {
    this.died = new Promise((resolve) => (this.resolveDied = resolve));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...options.env,
      PYTHONPATH: [PYTHON_PACKAGE_DIR, options.env?.PYTHONPATH ?? process.env.PYTHONPATH]
        .filter(Boolean)
        .join(':'),
      PYTHONUNBUFFERED: '1',
      KILN_MAX_RESPONSE_BYTES: String(options.maxResponseBytes ?? 0),
      KILN_REPORT_RSS: options.maxRssBytes ? '1' : '0',
    };
    const regions = options.sharedMemory === false ? { reason: 'off' } : SharedRegion.openPair();
    if ('reason' in regions) {
      this.sharedInputProblem = regions.reason;
      // Never the caller's: a worker maps only regions this process made for it.
      for (const key of ['INPUT', 'OUTPUT']) {
        delete env[`KILN_SHARED_${key}_FD`];
        delete env[`KILN_SHARED_${key}_BYTES`];
      }
    } else {
      ({ calls: this.region, answers: this.answers } = regions);
      // The worker inherits the regions' descriptors as fd 5 (calls) and fd 6 (answers).
      env.KILN_SHARED_INPUT_FD = '5';
      env.KILN_SHARED_INPUT_BYTES = String(regions.calls.size);
      env.KILN_SHARED_OUTPUT_FD = '6';
      env.KILN_SHARED_OUTPUT_BYTES = String(regions.answers.size);
    }
    this.child = spawn(
      options.pythonExecutable,
      [
        '-m',
        'kiln_python.worker',
        options.modelDir,
        options.entryPoint,
        options.handler,
        options.deviceId,
      ],
      {
        cwd: options.modelDir,
        env,
        stdio: [
          'ignore',
          'pipe',
          'pipe',
          'pipe',
          'pipe',
          this.region?.descriptor ?? 'ignore',
          this.answers?.descriptor ?? 'ignore',
        ],
      },
    );
    this.region?.closeDescriptor();
    this.answers?.closeDescriptor();
    const log = (this.log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`)));
    for (const stream of [this.child.stdout, this.child.stderr]) {
      let rest = '';
      stream?.setEncoding('utf8');
      stream?.on('data', (text: string) => {
        const lines = (rest + text).split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) log(`[${options.modelName}] ${line}`);
      });
    }
    this.requests = this.child.stdio[3] as Writable;
    const answerRegion = this.answers;
    const readAnswer = answerRegion
      ? (offset: number, size: number) => {
          const limit = this.responseLimit();
          if (size > limit) throw new FrameTooLargeError(size, limit);
          return answerRegion.copyOut(offset, size);
        }
      : undefined;
    const reader = new FrameReader(() => this.responseLimit());
    (this.child.stdio[4] as Readable).on('data', (chunk: Buffer) => {
      if (this.exitError) return;
      try {
        for (const body of reader.push(chunk)) this.settle(decodeFrame(body, readAnswer));
      } catch (error) {
        // The stream cannot be followed past a frame not read: the worker goes.
        this.fail(this.unreadable(error));
        this.child.kill('SIGKILL');
      }
    });
    this.requests.on('error', () => {
      // The exit handler fails every pending call.
    });
    this.exited = new Promise((resolve) => {
      this.child.once('error', (error) => {
        this.fail(
          new KilnError(
            KilnErrorCode.ModelLoadFailed,
            `cannot start ${options.pythonExecutable}: ${error.message}`,
          ),
        );
        resolve();
      });
      this.child.once('exit', (code, signal) => {
        this.fail(
          new KilnError(
            KilnErrorCode.WorkerCrashed,
            `Python worker of ${options.modelName} exited (${signal ?? `code ${code}`})`,
          ),
        );
        resolve();
      });
    });
  }

  /** Why it ended, as the crash of a worker (whatever failed its calls first). */
  private deathError(): KilnError {
    const error = this.exitError!;
    if (error.code === KilnErrorCode.WorkerCrashed) return error;
    return new KilnError(
      KilnErrorCode.WorkerCrashed,
      `Python worker of ${this.options.modelName} was killed: ${error.message}`,
      { cause: error },
    );
  }

  /** The Python process's id (undefined if it could not be started). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /**
   * Starts a worker and runs the init call (empty input); its time is bounded by the caller
   * (the pool's start timeout, model_loading_timeout), who closes a worker that takes too long.
   */
  static async start(options: PythonWorkerOptions, signal?: AbortSignal): Promise<PythonWorker> {
    const worker = new PythonWorker(options);
    const end = () => void worker.close();
    signal?.addEventListener('abort', end, { once: true });
    try {
      if (signal?.aborted) throw new KilnError(KilnErrorCode.Cancelled, 'the start was abandoned');
      const init = await worker.call({ ...options.initProperties }, [], { timeoutMs: Infinity });
      // Past the limit already, it would end after every call.
      const rss = rssOf(init);
      if (options.maxRssBytes && rss > options.maxRssBytes) {
        throw new KilnError(
          KilnErrorCode.ModelLoadFailed,
          `its worker holds ${mib(rss)} MiB once loaded, more than max_worker_rss_mb (${mib(options.maxRssBytes)})`,
        );
      }
    } catch (error) {
      await worker.close();
      const reason = error instanceof Error ? error.message : String(error);
      throw new KilnError(
        KilnErrorCode.ModelLoadFailed,
        `${options.entryPoint} of ${options.modelName} failed to load: ${reason}`,
        { cause: error },
      );
    } finally {
      signal?.removeEventListener('abort', end);
    }
    return worker;
  }

  /** Calls whose large contents went through shared memory. */
  get sharedInputCalls(): number {
    return this.region?.calls ?? 0;
  }

  /** Answer contents that came back through shared memory. */
  get sharedAnswerContents(): number {
    return this.answers?.reads ?? 0;
  }

  /**
   * One call; rejects with the handler's error, a timeout (the worker is then killed), a crash,
   * or the signal's reason once cancelled.
   */
  call(
    properties: FrameProperties,
    contents: readonly Content[],
    options: CallOptions = {},
  ): Promise<Frame> {
    if (this.exitError) return Promise.reject(this.exitError);
    const { timeoutMs = this.options.predictTimeoutMs, requests = 1, signal, onChunk } = options;
    if (signal?.aborted) return Promise.reject(cancelReason(signal));
    const id = this.nextId++;
    let parts: Buffer[];
    const placed = this.region?.place(contents);
    // With no other call in flight, this answer is read before any later one is written.
    const answerInRegion = this.answers !== undefined && this.pending.size === 0;
    try {
      parts = encodeFrameParts(
        { id, kind: FrameKind.Call, properties, contents },
        placed,
        answerInRegion,
      );
    } catch (error) {
      if (placed) this.region!.release();
      return Promise.reject(error as Error);
    }
    const deadline = performance.now() + timeoutMs;
    const shared = placed !== undefined;
    const responseLimit = this.options.maxResponseBytes
      ? this.options.maxResponseBytes * requests + FRAME_ALLOWANCE
      : Infinity;
    const answered = new Promise<Frame>((resolve, reject) => {
      const pending: Pending = {
        resolve,
        reject,
        deadline,
        timeoutMs,
        shared,
        responseLimit,
        onChunk,
      };
      this.pending.set(id, pending);
      if (signal) {
        const onAbort = () => this.cancel(id, cancelReason(signal));
        signal.addEventListener('abort', onAbort, { once: true });
        pending.unlisten = () => signal.removeEventListener('abort', onAbort);
      }
    });
    if (deadline < this.watchdogAt) this.armWatchdog(deadline);
    this.lastCallWrites = {
      socketBytes: parts.reduce((sum, part) => sum + part.byteLength, 0),
      sharedBytes: placed
        ? [...placed.keys()].reduce((sum, i) => sum + contents[i]!.bytes.byteLength, 0)
        : 0,
    };
    if (parts.length === 1) {
      this.requests.write(parts[0]);
    } else {
      // Corked, the parts leave in one writev; tensor data is never joined into a new buffer.
      this.requests.cork();
      for (const part of parts) this.requests.write(part);
      this.requests.uncork();
    }
    return answered;
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.end();
  }

  /** Ends its input: the worker exits once its call is answered (killed if it does not). */
  private async end(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.requests.end();
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 2000);
      await this.exited;
      clearTimeout(timer);
    }
  }

  /** Bytes the next answer's frame may announce: the most any call in flight allows. */
  private responseLimit(): number {
    if (!this.options.maxResponseBytes) return Infinity;
    let limit = 0;
    for (const pending of this.pending.values()) limit = Math.max(limit, pending.responseLimit);
    return this.pending.size === 0 ? FRAME_ALLOWANCE : limit;
  }

  /**
   * Interrupts a running call (SIGINT: a KeyboardInterrupt in the handler). It rejects once the
   * worker answers it; a handler that does not return within CANCEL_GRACE_MS is killed with its
   * worker.
   */
  private cancel(id: number, error: KilnError): void {
    const pending = this.pending.get(id);
    if (!pending || pending.cancelled) return;
    const timer = setTimeout(() => {
      this.fail(
        new KilnError(
          KilnErrorCode.WorkerCrashed,
          `Python worker of ${this.options.modelName} was killed: its cancelled call went on`,
        ),
      );
      this.child.kill('SIGKILL');
    }, CANCEL_GRACE_MS);
    pending.cancelled = { error, timer };
    this.child.kill('SIGINT');
  }

  private settle(frame: Frame): void {
    const pending = this.pending.get(frame.id);
    if (!pending) return;
    if (frame.kind === FrameKind.Chunk) {
      this.takeChunk(frame, pending);
      return;
    }
    this.pending.delete(frame.id);
    if (pending.shared) this.region!.release();
    this.release(pending);
    if (pending.cancelled) {
      pending.reject(pending.cancelled.error);
    } else if (frame.kind === FrameKind.Error) {
      // A code comes with an error the handler could not help (507: out of memory).
      const code = frame.properties.code;
      pending.reject(
        new KilnError(
          KilnErrorCode.EngineError,
          String(frame.properties.message ?? 'handler failed'),
          typeof code === 'number' ? { details: { code, httpStatus: code } } : {},
        ),
      );
    } else {
      pending.resolve(frame);
    }
    // Not after the init call (id 1): start() refuses a worker already past the limit.
    if (frame.id !== 1) this.endIfOver(rssOf(frame));
  }

  /**
   * Hands a chunk of a streamed answer over, then acks it so the worker produces the next. A
   * cancelled call gets no ack: SIGINT interrupts the worker's wait for it.
   */
  private takeChunk(frame: Frame, pending: Pending): void {
    if (pending.cancelled) return;
    pending.deadline = performance.now() + pending.timeoutMs;
    const ack = () => {
      if (this.pending.get(frame.id) !== pending || pending.cancelled || this.exitError) return;
      this.requests.write(
        encodeFrame({ id: frame.id, kind: FrameKind.Ack, properties: {}, contents: [] }),
      );
    };
    let taken: void | Promise<void>;
    try {
      taken = pending.onChunk?.(frame);
    } catch (error) {
      this.cancel(frame.id, KilnError.wrap(error, KilnErrorCode.Internal));
      return;
    }
    if (taken) {
      taken.then(ack, (error: unknown) =>
        this.cancel(frame.id, KilnError.wrap(error, KilnErrorCode.Internal)),
      );
    } else {
      ack();
    }
  }

  /** Stops watching a call that is answered or failed. */
  private release(pending: Pending): void {
    pending.unlisten?.();
    if (pending.cancelled) clearTimeout(pending.cancelled.timer);
  }

  /** A worker past max_worker_rss_mb ends once its answer is given: it dies, to be replaced. */
  private endIfOver(rss: number): void {
    const limit = this.options.maxRssBytes;
    if (!limit || rss <= limit || this.exitError) return;
    const reason = `its RSS reached ${mib(rss)} MiB, more than max_worker_rss_mb (${mib(limit)})`;
    this.log(`[${this.options.modelName}] Python worker ends: ${reason}`);
    this.fail(
      new KilnError(
        KilnErrorCode.WorkerCrashed,
        `Python worker of ${this.options.modelName} ended: ${reason}`,
      ),
    );
    void this.end();
  }

  /** The error calls in flight get when the worker's answers cannot be read. */
  private unreadable(error: unknown): KilnError {
    if (error instanceof FrameTooLargeError) {
      const limit = this.options.maxResponseBytes ?? 0;
      return new KilnError(
        KilnErrorCode.EngineError,
        `the handler's answer of ${error.length} bytes passes max_response_size (${limit} bytes per request); it was not read`,
        { details: { code: 507, httpStatus: 507 } },
      );
    }
    return KilnError.wrap(
      error,
      KilnErrorCode.EngineError,
      'malformed frame from the Python worker',
    );
  }

  private fail(error: KilnError): void {
    this.exitError ??= error;
    if (!this.closing) this.resolveDied(this.deathError());
    clearTimeout(this.watchdog);
    this.watchdog = undefined;
    this.watchdogAt = Infinity;
    for (const [id, pending] of this.pending) {
      this.release(pending);
      pending.reject(pending.cancelled?.error ?? error);
      this.pending.delete(id);
    }
    // Nothing reads the region any more: the worker is gone or being killed.
    this.region?.release();
  }

  private armWatchdog(deadline: number): void {
    clearTimeout(this.watchdog);
    this.watchdogAt = deadline;
    this.watchdog = setTimeout(() => this.checkDeadlines(), deadline - performance.now());
  }

  /** Times out the first call past its deadline, else waits for the earliest one left. */
  private checkDeadlines(): void {
    this.watchdog = undefined;
    this.watchdogAt = Infinity;
    const now = performance.now();
    let earliest = Infinity;
    for (const [id, pending] of this.pending) {
      if (pending.deadline <= now) return this.timeOut(id, pending);
      earliest = Math.min(earliest, pending.deadline);
    }
    if (earliest < Infinity) this.armWatchdog(earliest);
  }

  private timeOut(id: number, pending: Pending): void {
    this.pending.delete(id);
    this.release(pending);
    // Released by fail() below, once the worker that may still read it is being killed.
    pending.reject(
      new KilnError(
        KilnErrorCode.Timeout,
        `${this.options.handler} of ${this.options.modelName} did not answer within ${pending.timeoutMs} ms`,
      ),
    );
    // A hung handler cannot be interrupted: the worker dies, and its owner replaces it.
    this.fail(
      new KilnError(
        KilnErrorCode.WorkerCrashed,
        `Python worker of ${this.options.modelName} was killed after a timeout`,
      ),
    );
    this.child.kill('SIGKILL');
  }
}

function rssOf(frame: Frame): number {
  const rss = frame.properties.kiln_rss_bytes;
  return typeof rss === 'number' ? rss : 0;
}

function mib(bytes: number): number {
  return Math.round(bytes / 2 ** 20);
}

function cancelReason(signal: AbortSignal): KilnError {
  const reason: unknown = signal.reason;
  return reason instanceof KilnError
    ? reason
    : new KilnError(KilnErrorCode.Cancelled, 'request was cancelled');
}
