import type { ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { ServingChunk, ServingChunkHead, ServingOutput } from '@kiln/core';
import type { JobHandle, JobOptions } from '@kiln/batching';
import { isSendableHeaderValue, sendableHeaders } from '../security/response-headers.js';
import { type ErrorMappingOptions, toHttpError } from './error-status.js';
import type { ServerContext } from '../routes/server-context.js';
import { answerUnlessGone } from './serving-request.js';

/** How an answer starts: whole, or as a stream whose first chunk has come. */
export type AnswerStart =
  | { readonly output: ServingOutput; readonly stream?: undefined }
  | { readonly stream: ChunkedAnswer; readonly output?: undefined };

/** Whether a model's answers may stream: those of serve workers (Python handlers) may. */
export function mayStream(
  server: ServerContext,
  name: string,
  version: string | undefined,
): boolean {
  return server.models.get(name, version).kind === 'serve';
}

/**
 * Submits a request whose answer may stream (a Python handler's `add_stream_content`) and waits
 * for how it starts: its whole output, or the first chunk of a stream that goes on as the model
 * produces it, its status and headers from that first chunk. A stream that fails after it has
 * started ends with an error line (`errors` maps the error to its status and type). The job is
 * cancelled when the client goes away before the answer, whole or streamed, is written. Unless
 * it `streams` (see mayStream), the answer is awaited whole.
 */
export async function startAnswer(
  res: ServerResponse,
  errors: ErrorMappingOptions,
  submit: (options: JobOptions) => JobHandle<ServingOutput>,
  streams: boolean,
): Promise<AnswerStart> {
  // Most models never stream: their requests skip the machinery below.
  if (!streams) return { output: await answerUnlessGone(res, submit({})) };
  let stream: ChunkedAnswer | undefined;
  let started!: (stream: ChunkedAnswer) => void;
  const first = new Promise<ChunkedAnswer>((resolve) => (started = resolve));
  const handle = submit({
    onChunk: (piece) => {
      const chunk = piece as ServingChunk;
      if (!stream) {
        stream = new ChunkedAnswer(chunk.head ?? DEFAULT_HEAD, errors);
        started(stream);
      }
      return stream.put(chunk.body);
    },
  });
  const result = answerUnlessGone(res, handle);
  const start = await Promise.race<AnswerStart>([
    result.then((output) => ({ output })),
    first.then((chunked) => ({ stream: chunked })),
  ]);
  if (start.stream) {
    const chunked = start.stream;
    result.then(
      () => chunked.finish(),
      (error: unknown) => chunked.fail(error),
    );
  }
  return start;
}

const DEFAULT_HEAD: ServingChunkHead = { status: 200, contentType: undefined };

/**
 * A streamed answer's body: each chunk as the model produced it. `put` holds the model's next
 * chunk while the client reads slower than it produces (the readable's buffer is full).
 */
export class ChunkedAnswer extends Readable {
  private wanted: (() => void) | undefined;

  constructor(
    readonly head: ServingChunkHead,
    private readonly errors: ErrorMappingOptions,
  ) {
    super();
  }

  /** Its status line's headers that may be sent: the model's own, and its content type. */
  get headers(): Readonly<Record<string, string>> {
    const type = this.head.contentType;
    return {
      ...(this.head.headers && sendableHeaders(this.head.headers)),
      ...(type !== undefined && isSendableHeaderValue(type) ? { 'content-type': type } : {}),
      // Each chunk is worth sending as it comes: no proxy should hold them back.
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    };
  }

  put(body: Uint8Array): void | Promise<void> {
    if (this.destroyed || this.readableEnded) return;
    if (this.push(body)) return;
    return new Promise((resolve) => (this.wanted = resolve));
  }

  /** The model's stream ended: so does the answer. */
  finish(): void {
    if (!this.destroyed) this.push(null);
  }

  /** The model's stream failed: the answer ends with a line that says why. */
  fail(error: unknown): void {
    if (this.destroyed) return;
    const mapped = toHttpError(error, this.errors);
    const body = JSON.stringify({
      code: mapped.status,
      type: mapped.type,
      message: mapped.message,
    });
    const events = /^text\/event-stream/i.test(this.head.contentType ?? '');
    this.push(events ? `data: ${body}\n\n` : `${body}\n`);
    this.push(null);
  }

  override _read(): void {
    this.release();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.release();
    callback(error);
  }

  private release(): void {
    const wanted = this.wanted;
    this.wanted = undefined;
    wanted?.();
  }
}
