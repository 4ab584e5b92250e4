import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context } from 'koa';
import {
  KilnError,
  KilnErrorCode,
  type ServingInput,
  type ServingOutput,
  encodeTensors,
  replyForAccept,
} from '@kiln/core';
import type { JobHandle } from '@kiln/batching';
import { isSendableHeaderValue, sendableHeaders } from '../security/response-headers.js';
import { type BodyLimits, readBody, readMultipart } from './read-body.js';
import type { ChunkedAnswer } from './streamed-answer.js';

/**
 * Builds a translator input from an HTTP request: the raw body, or for multipart requests
 * the single part, or several tensor parts (joined into one list, named by their fields, where
 * the model runs). Every buffer belongs to the request: the pool moves it to its worker.
 */
export async function servingInputFrom(
  req: IncomingMessage,
  limits: BodyLimits,
): Promise<ServingInput> {
  const contentType = req.headers['content-type'] || undefined;
  const headers = pickHeaders(req);
  const query = queryOf(req);
  if (contentType?.toLowerCase().startsWith('multipart/form-data')) {
    const parts = await readMultipart(req, limits);
    if (parts.length === 0)
      throw new KilnError(KilnErrorCode.InvalidInput, 'multipart request has no parts');
    if (parts.length === 1) {
      const [part] = parts;
      return {
        body: part!.data,
        field: part!.name,
        headers,
        ...query,
        owned: true,
        maxDecodedBytes: limits.maxBytes,
        ...(part!.contentType ? { contentType: part!.contentType } : {}),
      };
    }
    // Decoded where the model runs, like every other body.
    const tensorParts = parts.map(({ name, data, contentType }) => ({ name, data, contentType }));
    return { parts: tensorParts, headers, ...query, owned: true, maxDecodedBytes: limits.maxBytes };
  }
  const body = await readBody(req, limits);
  if (body.byteLength === 0)
    throw new KilnError(KilnErrorCode.InvalidInput, 'request body is empty');
  return {
    body,
    headers,
    ...query,
    owned: true,
    maxDecodedBytes: limits.maxBytes,
    ...(contentType ? { contentType } : {}),
  };
}

/** The URL's query parameters, when it has any. */
function queryOf(req: IncomingMessage): { query?: [string, string][] } {
  const at = req.url?.indexOf('?') ?? -1;
  if (at < 0) return {};
  const query = [...new URLSearchParams(req.url!.slice(at + 1))];
  return query.length > 0 ? { query } : {};
}

/** What an answer carries: its status, content type as Koa would set it, bytes, headers. */
export interface ServingAnswer {
  /** 200; 204 for a model that answered nothing (sent without a body); a handler's own code. */
  readonly status: number;
  /** Undefined: the body goes out without a Content-Type (bytes the model did not label). */
  readonly contentType: string | undefined;
  readonly body: Buffer;
  readonly headers: Readonly<Record<string, string>> | undefined;
}

/**
 * A translator output as an answer: JSON as JSON; tensors in the format `Accept` asks for, else
 * in the request's own when it sent npz or safetensors (`requestType`).
 */
export function servingAnswer(
  output: ServingOutput,
  accept: string | undefined,
  requestType?: string,
): ServingAnswer {
  const status = output.status ?? 200;
  const headers = output.headers && sendableHeaders(output.headers);
  if (output.type === 'bytes') {
    const type = output.contentType;
    return {
      status,
      // A content type that cannot be sent is no reason to fail the answer.
      contentType:
        type === undefined || isSendableHeaderValue(type) ? type : 'application/octet-stream',
      body: Buffer.from(output.body.buffer, output.body.byteOffset, output.body.byteLength),
      headers,
    };
  }
  if (output.type === 'streamed')
    throw new KilnError(KilnErrorCode.Internal, 'a streamed answer has no body to send whole');
  if (output.type === 'json') {
    // A string (or null) is JSON too: quoted (or spelled null).
    return {
      status,
      contentType: 'application/json',
      body: Buffer.from(JSON.stringify(output.value) ?? 'null'),
      headers,
    };
  }
  const reply = replyForAccept(accept, output.tensors.length, requestType);
  const encoded = encodeTensors(output.tensors, reply.format);
  return {
    status,
    contentType: reply.contentType,
    body: Buffer.from(encoded.body.buffer, encoded.body.byteOffset, encoded.body.byteLength),
    headers,
  };
}

/** Writes a translator output through Koa. */
export function writeServingOutput(
  ctx: Context,
  output: ServingOutput,
  requestType?: string,
): void {
  const answer = servingAnswer(output, ctx.get('accept') || undefined, requestType);
  for (const [name, value] of Object.entries(answer.headers ?? {})) ctx.set(name, value);
  ctx.status = answer.status;
  if (answer.status === 204) return;
  ctx.body = answer.body;
  // Koa labels a Buffer body application/octet-stream; unlabelled bytes go out unlabelled.
  if (answer.contentType === undefined) ctx.remove('Content-Type');
  else ctx.type = answer.contentType;
}

/** Writes an answer through Koa: a whole output, or a stream as its chunks come. */
export function writeServingAnswer(
  ctx: Context,
  start: { readonly output?: ServingOutput; readonly stream?: ChunkedAnswer },
  requestType: string | undefined,
): void {
  if (start.output) return writeServingOutput(ctx, start.output, requestType);
  const stream = start.stream!;
  ctx.status = stream.head.status;
  for (const [name, value] of Object.entries(stream.headers)) ctx.set(name, value);
  // Koa labels a stream body application/octet-stream; an unlabelled stream goes out unlabelled.
  const typed = ctx.response.get('Content-Type') !== '';
  ctx.body = stream;
  if (!typed) ctx.remove('Content-Type');
}

/**
 * Cancels a queued or running request when its client goes away before the answer is
 * written, so that nobody's work is spent on it; returns the answer.
 */
export function answerUnlessGone<O>(res: ServerResponse, handle: JobHandle<O>): Promise<O> {
  const onClose = () => {
    if (!res.writableFinished) handle.cancel('client closed the connection');
  };
  res.once('close', onClose);
  return handle.result.finally(() => res.off('close', onClose));
}

function pickHeaders(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(req.headers)) {
    if (typeof value === 'string' && key !== 'authorization' && key !== 'cookie')
      headers[key] = value;
  }
  return headers;
}
