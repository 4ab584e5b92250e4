import { channel } from 'node:diagnostics_channel';
import type { NDList } from '@kiln/core';
import {
  KilnError,
  KilnErrorCode,
  type ExecutionContext,
  type ForwardOptions,
  type PredictResult,
  type ServingChunkSink,
  type ServingContext,
  type ServingInput,
  type ServingOutput,
} from '@kiln/core';
import { allowedCpusOf, parseCpuList } from './cpu-affinity.js';
import type { Frame } from './frames.js';
import { PythonWorker, type PythonWorkerOptions } from './python-worker.js';
import { type PythonRequest, outputOf, requestOf } from './serving.js';
import { StreamedAnswer } from './streamed-answer.js';

/**
 * One Python process serving requests: each call carries the requests of a batch, every one
 * with its own properties and contents (the worker builds DJL's Input of them), and the answer
 * one Output per request. A process that dies is not replaced here: `onDeath` tells the pool.
 */
export class PythonServingContext implements ServingContext, ExecutionContext {
  private constructor(
    private readonly worker: PythonWorker,
    private readonly options: PythonWorkerOptions,
    private readonly onClose: () => void,
  ) {}

  static async start(
    options: PythonWorkerOptions,
    onClose: () => void,
    signal?: AbortSignal,
  ): Promise<PythonServingContext> {
    return new PythonServingContext(await PythonWorker.start(options, signal), options, onClose);
  }

  async serve(
    inputs: readonly ServingInput[],
    options: {
      readonly signal?: AbortSignal;
      readonly onChunk?: readonly (ServingChunkSink | undefined)[];
    } = {},
  ): Promise<PredictResult<ServingOutput>[]> {
    const results: PredictResult<ServingOutput>[] = new Array(inputs.length);
    const sent: { index: number; request: PythonRequest }[] = [];
    inputs.forEach((input, index) => {
      try {
        sent.push({ index, request: requestOf(input) });
      } catch (error) {
        results[index] = { ok: false, error: KilnError.wrap(error, KilnErrorCode.InvalidInput) };
      }
    });
    if (sent.length === 0) return results;
    // Properties: one [properties, number of contents] per request; contents in their order.
    const properties = JSON.stringify(
      sent.map(({ request }) => [request.properties, request.contents.length]),
    );
    const contents = sent.flatMap(({ request }) => request.contents);
    let frame: Frame;
    // Only a call of one request may stream (the worker refuses a batch's stream).
    const stream = new StreamedAnswer(
      sent.length === 1 ? options.onChunk?.[sent[0]!.index] : undefined,
    );
    const started = performance.now();
    try {
      frame = await this.worker.call(properties, contents, {
        requests: sent.length,
        ...(options.signal ? { signal: options.signal } : {}),
        onChunk: (chunk) => stream.take(chunk),
      });
    } catch (cause) {
      const error = KilnError.wrap(cause, KilnErrorCode.EngineError);
      // The process died under the call: the batch's requests may run again elsewhere.
      if (error.code === KilnErrorCode.WorkerCrashed) throw error;
      for (const { index } of sent) results[index] = { ok: false, error };
      return results;
    }
    this.publishTimings(frame, performance.now() - started);
    const answers = (frame.properties.answers ?? []) as [Record<string, unknown>, number][];
    let at = 0;
    sent.forEach(({ index, request }, i) => {
      const [answer, count] = answers[i] ?? [
        { code: 500, message: 'the handler gave no answer' },
        0,
      ];
      results[index] = answer.kiln_streamed
        ? stream.result(request, answer)
        : outputOf(request, answer, frame.contents.slice(at, (at += count)));
    });
    return results;
  }

  /** Tensors in, tensors out: the handler's Input has them as raw tensor contents. */
  async forward(input: NDList, options: ForwardOptions = {}): Promise<NDList> {
    const [result] = await this.serve([{ tensors: input, rawTensors: true }], options);
    if (!result!.ok) throw result!.error;
    const output = result!.value;
    if (output.type === 'tensors') return output.tensors;
    throw new KilnError(
      KilnErrorCode.EngineError,
      `the handler answered ${output.type}, not tensors`,
    );
  }

  onDeath(listener: (error: KilnError) => void): void {
    void this.worker.died.then(listener);
  }

  /**
   * The cores its Python process runs on, read back from /proc when it was asked to pin
   * (`KILN_CPU_CORES`, which the worker applies with sched_setaffinity before anything else);
   * undefined when it was not asked, or the mask is not the one asked for.
   */
  get pinnedCores(): readonly number[] | undefined {
    const asked = this.options.env?.KILN_CPU_CORES;
    const pid = this.worker.pid;
    if (!asked || pid === undefined) return undefined;
    const allowed = allowedCpusOf(pid);
    const wanted = parseCpuList(asked);
    return allowed && allowed.join(',') === wanted.join(',') ? allowed : undefined;
  }

  /** The Python process's id. */
  get pid(): number | undefined {
    return this.worker.pid;
  }

  /** Calls whose large contents reached the worker through shared memory. */
  get sharedInputCalls(): number {
    return this.worker.sharedInputCalls;
  }

  /** Answer contents that came back through shared memory. */
  get sharedAnswerContents(): number {
    return this.worker.sharedAnswerContents;
  }

  /** Why the worker has no shared input region, when it has none. */
  get sharedInputProblem(): string | undefined {
    return this.worker.sharedInputProblem;
  }

  async close(): Promise<void> {
    this.onClose();
    await this.worker.close();
  }

  private publishTimings(frame: Frame, roundTripMs: number): void {
    const handlerUs = frame.properties.kiln_handler_us;
    if (typeof handlerUs !== 'number' || !callTimings.hasSubscribers) return;
    callTimings.publish({
      model: this.options.modelName,
      handlerMs: handlerUs / 1000,
      ipcMs: Math.max(0, roundTripMs - handlerUs / 1000),
      ...this.worker.lastCallWrites,
    } satisfies PythonCallTimings);
  }
}

/** Timings of one call, published on the `kiln:python:call` diagnostics channel. */
export interface PythonCallTimings {
  readonly model: string;
  /** handle(inputs) itself, measured in the Python process. */
  readonly handlerMs: number;
  /** The rest of the round trip: framing, pipes and decoding on both sides. */
  readonly ipcMs: number;
  /** Bytes of the call written to the worker's socket (one write: one writev of its parts). */
  readonly socketBytes: number;
  /** Bytes of the call copied into shared memory (its large contents, each once). */
  readonly sharedBytes: number;
}

export const CALL_TIMINGS_CHANNEL = 'kiln:python:call';
const callTimings = channel(CALL_TIMINGS_CHANNEL);
