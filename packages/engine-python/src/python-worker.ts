import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Readable, Writable } from 'node:stream';
import { KilnError, KilnErrorCode } from '@kiln/core';
import {
  type Content,
  type Frame,
  FrameKind,
  FrameReader,
  decodeFrame,
  encodeFrameParts,
} from './frames.js';

/** The Python package shipped with this adapter (kiln_python and djl_python). */
export const PYTHON_PACKAGE_DIR = fileURLToPath(new URL('../python', import.meta.url));

export interface PythonWorkerOptions {
  readonly modelName: string;
  readonly modelDir: string;
  readonly pythonExecutable: string;
  readonly entryPoint: string;
  readonly handler: string;
  /** Milliseconds for the init call (model.py import + handle(empty input)). */
  readonly loadTimeoutMs: number;
  /** Milliseconds for each call. */
  readonly predictTimeoutMs: number;
  /** Where the worker's stdout/stderr lines go. */
  readonly log?: (line: string) => void;
}

interface Pending {
  resolve(frame: Frame): void;
  reject(error: KilnError): void;
  timer: NodeJS.Timeout;
}

/**
 * One Python process running model.py. Calls are framed over fd 3 (to Python) and fd 4 (back),
 * keyed by request id, so a crash fails exactly the calls in flight and nothing else.
 */
export class PythonWorker {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private exitError: KilnError | undefined;
  readonly exited: Promise<void>;

  private constructor(private readonly options: PythonWorkerOptions) {
    const env = {
      ...process.env,
      PYTHONPATH: [PYTHON_PACKAGE_DIR, process.env.PYTHONPATH].filter(Boolean).join(':'),
      PYTHONUNBUFFERED: '1',
    };
    this.child = spawn(
      options.pythonExecutable,
      ['-m', 'kiln_python.worker', options.modelDir, options.entryPoint, options.handler],
      { cwd: options.modelDir, env, stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'] },
    );
    const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    for (const stream of [this.child.stdout, this.child.stderr]) {
      let rest = '';
      stream?.setEncoding('utf8');
      stream?.on('data', (text: string) => {
        const lines = (rest + text).split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) log(`[${options.modelName}] ${line}`);
      });
    }
    const reader = new FrameReader();
    (this.child.stdio[4] as Readable).on('data', (chunk: Buffer) => {
      for (const body of reader.push(chunk)) this.settle(decodeFrame(body));
    });
    (this.child.stdio[3] as Writable).on('error', () => {
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

  /** Starts a worker and runs the init call (empty input) within the loading timeout. */
  static async start(options: PythonWorkerOptions): Promise<PythonWorker> {
    const worker = new PythonWorker(options);
    try {
      await worker.call({}, [], options.loadTimeoutMs);
    } catch (error) {
      await worker.close();
      const reason = error instanceof Error ? error.message : String(error);
      throw new KilnError(
        KilnErrorCode.ModelLoadFailed,
        `${options.entryPoint} of ${options.modelName} failed to load: ${reason}`,
        { cause: error },
      );
    }
    return worker;
  }

  get alive(): boolean {
    return this.exitError === undefined;
  }

  /** One call; rejects with the handler's error, a timeout (the worker is then killed) or a crash. */
  call(
    properties: Record<string, unknown>,
    contents: readonly Content[],
    timeoutMs = this.options.predictTimeoutMs,
  ): Promise<Frame> {
    if (this.exitError) return Promise.reject(this.exitError);
    const id = this.nextId++;
    return new Promise<Frame>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(
          new KilnError(
            KilnErrorCode.Timeout,
            `${this.options.handler} of ${this.options.modelName} did not answer within ${timeoutMs} ms`,
          ),
        );
        // A hung handler cannot be interrupted; the pool replaces the worker. Mark it dead
        // now, not at its exit event, so the very next call starts a fresh process.
        this.fail(
          new KilnError(
            KilnErrorCode.WorkerCrashed,
            `Python worker of ${this.options.modelName} was killed after a timeout`,
          ),
        );
        this.child.kill('SIGKILL');
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      // Corked, the parts leave in one writev; tensor data is never joined into a new buffer.
      const pipe = this.child.stdio[3] as Writable;
      pipe.cork();
      for (const part of encodeFrameParts({ id, kind: FrameKind.Call, properties, contents }))
        pipe.write(part);
      pipe.uncork();
    });
  }

  async close(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      (this.child.stdio[3] as Writable).end();
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 2000);
      await this.exited;
      clearTimeout(timer);
    }
  }

  private settle(frame: Frame): void {
    const pending = this.pending.get(frame.id);
    if (!pending) return;
    this.pending.delete(frame.id);
    clearTimeout(pending.timer);
    if (frame.kind === FrameKind.Error) {
      pending.reject(
        new KilnError(
          KilnErrorCode.EngineError,
          String(frame.properties.message ?? 'handler failed'),
        ),
      );
    } else {
      pending.resolve(frame);
    }
  }

  private fail(error: KilnError): void {
    this.exitError ??= error;
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(error);
      this.pending.delete(id);
    }
  }
}
