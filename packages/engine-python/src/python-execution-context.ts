import { channel } from 'node:diagnostics_channel';
import {
  NDList,
  Tensor,
  bytesOf,
  viewBytes,
  type AnyTensor,
  type ExecutionContext,
  type ForwardOptions,
  type NumericDType,
} from '@kiln/core';
import { allowedCpusOf, parseCpuList } from './cpu-affinity.js';
import type { Content } from './frames.js';
import { PythonWorker, type PythonWorkerOptions } from './python-worker.js';
import { META_TENSOR, failOnErrorCode, metaTensor, readMeta } from './serving.js';

/** One Python process; a dead one is replaced by a fresh one on the next call. */
export class PythonExecutionContext implements ExecutionContext {
  private worker: PythonWorker | undefined;

  constructor(
    private readonly workerOptions: PythonWorkerOptions,
    private readonly onClose: () => void,
  ) {}

  async start(): Promise<void> {
    this.worker = await PythonWorker.start(this.workerOptions);
  }

  /** A worker that died, was killed, or retired past max_worker_rss_mb is replaced first. */
  async forward(input: NDList, options: ForwardOptions = {}): Promise<NDList> {
    if (!this.worker?.alive) await this.start();
    const { properties, contents, hasMeta, batched, requests } = frameOf(input);
    const started = performance.now();
    const frame = await this.worker!.call(properties, contents, {
      requests,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const roundTripMs = performance.now() - started;
    const { kiln_handler_us: handlerUs, kiln_rss_bytes: _rss, ...answer } = frame.properties;
    if (typeof handlerUs === 'number') {
      publishCallTimings({
        model: this.workerOptions.modelName,
        handlerMs: handlerUs / 1000,
        ipcMs: Math.max(0, roundTripMs - handlerUs / 1000),
      });
    }
    const tensors = frame.contents.map(contentTensor);
    if (!hasMeta && !batched) {
      failOnErrorCode(stringProperties(answer));
      return new NDList(tensors);
    }
    // The whole call failed (a batch is then retried request by request).
    failOnErrorCode(stringProperties({ code: answer.code, message: answer.message }));
    const answerBytes = frame.contents.filter((c) => !c.dtype).map((c) => c.name);
    return new NDList([
      ...tensors,
      metaTensor({ properties: stringProperties(answer), bytes: answerBytes }),
    ]);
  }

  /**
   * The cores its Python process runs on, read back from /proc when it was asked to pin
   * (`KILN_CPU_CORES`, which the worker applies with sched_setaffinity before anything else);
   * undefined when it was not asked, or the mask is not the one asked for.
   */
  get pinnedCores(): readonly number[] | undefined {
    const asked = this.workerOptions.env?.KILN_CPU_CORES;
    const pid = this.worker?.pid;
    if (!asked || pid === undefined) return undefined;
    const allowed = allowedCpusOf(pid);
    const wanted = parseCpuList(asked);
    return allowed && allowed.join(',') === wanted.join(',') ? allowed : undefined;
  }

  /** Calls whose large contents reached the worker through shared memory. */
  get sharedInputCalls(): number {
    return this.worker?.sharedInputCalls ?? 0;
  }

  /** Answer contents that came back through shared memory. */
  get sharedAnswerContents(): number {
    return this.worker?.sharedAnswerContents ?? 0;
  }

  /** Why the worker has no shared input region, when it has none. */
  get sharedInputProblem(): string | undefined {
    return this.worker?.sharedInputProblem;
  }

  async close(): Promise<void> {
    this.onClose();
    await this.worker?.close();
  }
}

/** Timings of one call, published on the `kiln:python:call` diagnostics channel. */
export interface PythonCallTimings {
  readonly model: string;
  /** handle(inputs) itself, measured in the Python process. */
  readonly handlerMs: number;
  /** The rest of the round trip: framing, pipes and decoding on both sides. */
  readonly ipcMs: number;
}

export const CALL_TIMINGS_CHANNEL = 'kiln:python:call';
const callTimings = channel(CALL_TIMINGS_CHANNEL);

function publishCallTimings(timings: PythonCallTimings): void {
  if (callTimings.hasSubscribers) callTimings.publish(timings);
}

const PREFIXED_META = `_${META_TENSOR}`;

/**
 * The frame for an NDList: meta tensors become properties (batch_NNN_-prefixed per request),
 * written as JSON text.
 */
function frameOf(input: NDList): {
  properties: string;
  contents: Content[];
  hasMeta: boolean;
  /** Whether the list is a batch (its own meta carries `batch_size`). */
  batched: boolean;
  /** Requests the list holds: a batch's size, else 1. */
  requests: number;
} {
  const entries: string[] = [];
  const bytes = new Set<string>();
  const rest: AnyTensor[] = [];
  let hasMeta = false;
  let batched = false;
  let requests = 1;
  for (const tensor of input) {
    const name = tensor.name ?? '';
    if (name === META_TENSOR || name.endsWith(PREFIXED_META)) {
      const prefix = name.slice(0, name.length - META_TENSOR.length);
      const meta = readMeta(tensor);
      hasMeta = true;
      if (prefix === '' && meta.properties.batch_size !== undefined) {
        batched = true;
        requests = Math.max(1, Number(meta.properties.batch_size) || 1);
      }
      for (const key in meta.properties) {
        const value = meta.properties[key];
        // As JSON.stringify of an object leaves them out.
        if (value === undefined) continue;
        entries.push(`${JSON.stringify(prefix + key)}:${JSON.stringify(value)}`);
      }
      // A batch's metas name their request's own contents; the contents carry its prefix.
      for (const n of meta.bytes) bytes.add(prefix + n);
    } else {
      rest.push(tensor);
    }
  }
  const contents = rest.map((tensor, i) => {
    const name = tensor.name ?? `input${i}`;
    return bytes.has(name) && tensor.dtype === 'uint8'
      ? { name, bytes: tensor.data as Uint8Array }
      : tensorContent(tensor, name);
  });
  return { properties: `{${entries.join(',')}}`, contents, hasMeta, batched, requests };
}

function stringProperties(properties: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(properties)) {
    if (value !== undefined && value !== null) out[key] = String(value);
  }
  return out;
}

function tensorContent(tensor: AnyTensor, name: string): Content {
  if (tensor.dtype === 'string') {
    const text = (tensor.data as string[]).join('');
    return { name, bytes: new TextEncoder().encode(text) };
  }
  return { name, dtype: tensor.dtype, shape: tensor.shape, bytes: bytesOf(tensor.data as never) };
}

function contentTensor(content: Content): AnyTensor {
  if (!content.dtype || content.dtype === 'string') {
    return new Tensor('uint8', content.bytes, [content.bytes.length], content.name);
  }
  const dtype = content.dtype as NumericDType;
  return new Tensor(
    dtype,
    viewBytes(dtype, content.bytes) as never,
    content.shape ?? [],
    content.name,
  );
}
