import type { PredictResult, ServingChunkSink, ServingOutput } from '@kiln/core';
import type { Frame } from './frames.js';
import { type PythonRequest, chunkHeadOf, outputOf } from './serving.js';

/**
 * The chunks of one request's streamed answer (`Output.add_stream_content`): handed to the
 * request's sink as they come, or, for a request without one (gRPC, a batch), gathered into
 * one answer.
 */
export class StreamedAnswer {
  private started = false;
  private readonly gathered: Uint8Array[] = [];

  constructor(private readonly sink: ServingChunkSink | undefined) {}

  /** Takes a chunk frame; the worker produces the next once what this returns settles. */
  take(frame: Frame): void | Promise<void> {
    const body = frame.contents[0]?.bytes ?? new Uint8Array(0);
    const first = !this.started;
    this.started = true;
    if (!this.sink) {
      this.gathered.push(body);
      return;
    }
    return this.sink(first ? { head: chunkHeadOf(frame.properties), body } : { body });
  }

  /** The request's result once its stream has ended; `answer` is its Output's properties. */
  result(
    request: PythonRequest,
    answer: Readonly<Record<string, unknown>>,
  ): PredictResult<ServingOutput> {
    if (this.sink && this.started) return { ok: true, value: { type: 'streamed' } };
    const bytes = Buffer.concat(this.gathered);
    return outputOf(request, answer, [{ name: 'data', bytes }]);
  }
}
