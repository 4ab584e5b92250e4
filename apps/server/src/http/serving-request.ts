import type { Context } from 'koa';
import {
  KilnError,
  KilnErrorCode,
  type ServingInput,
  type ServingOutput,
  encodeTensors,
  formatForAccept,
} from '@kiln/core';
import type { JobHandle } from '@kiln/batching';
import { type BodyLimits, readBody, readMultipart } from './read-body.js';

/**
 * Builds a translator input from an HTTP request: the raw body, or for multipart requests
 * the single part, or several tensor parts (joined into one list, named by their fields, where
 * the model runs). Every buffer belongs to the request: the pool moves it to its worker.
 */
export async function servingInputFrom(ctx: Context, limits: BodyLimits): Promise<ServingInput> {
  const contentType = ctx.get('content-type') || undefined;
  const headers = pickHeaders(ctx);
  if (contentType?.toLowerCase().startsWith('multipart/form-data')) {
    const parts = await readMultipart(ctx.req, limits);
    if (parts.length === 0)
      throw new KilnError(KilnErrorCode.InvalidInput, 'multipart request has no parts');
    if (parts.length === 1) {
      const [part] = parts;
      return {
        body: part!.data,
        headers,
        owned: true,
        maxDecodedBytes: limits.maxBytes,
        ...(part!.contentType ? { contentType: part!.contentType } : {}),
      };
    }
    // Decoded where the model runs, like every other body.
    const tensorParts = parts.map(({ name, data, contentType }) => ({ name, data, contentType }));
    return { parts: tensorParts, headers, owned: true, maxDecodedBytes: limits.maxBytes };
  }
  const body = await readBody(ctx.req, limits);
  if (body.byteLength === 0)
    throw new KilnError(KilnErrorCode.InvalidInput, 'request body is empty');
  return {
    body,
    headers,
    owned: true,
    maxDecodedBytes: limits.maxBytes,
    ...(contentType ? { contentType } : {}),
  };
}

/** Writes a translator output: JSON as JSON; tensors in the format `Accept` asks for. */
export function writeServingOutput(ctx: Context, output: ServingOutput): void {
  if (output.type === 'bytes') {
    for (const [name, value] of Object.entries(output.headers ?? {})) ctx.set(name, value);
    ctx.type = output.contentType;
    ctx.body = Buffer.from(output.body.buffer, output.body.byteOffset, output.body.byteLength);
    return;
  }
  if (output.type === 'json') {
    ctx.type = 'application/json';
    // Koa would send a string (or null) as it is; JSON needs it quoted (or spelled null).
    ctx.body =
      typeof output.value === 'string' || output.value === null
        ? JSON.stringify(output.value)
        : output.value;
    return;
  }
  const encoded = encodeTensors(
    output.tensors,
    formatForAccept(ctx.get('accept') || undefined, output.tensors.length),
  );
  ctx.type = encoded.contentType;
  ctx.body = Buffer.from(encoded.body.buffer, encoded.body.byteOffset, encoded.body.byteLength);
}

/**
 * Cancels a queued or running request when its client goes away before the answer is
 * written, so that nobody's work is spent on it; returns the answer.
 */
export function answerUnlessGone<O>(ctx: Context, handle: JobHandle<O>): Promise<O> {
  const onClose = () => {
    if (!ctx.res.writableFinished) handle.cancel('client closed the connection');
  };
  ctx.res.once('close', onClose);
  return handle.result.finally(() => ctx.res.off('close', onClose));
}

function pickHeaders(ctx: Context): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(ctx.headers)) {
    if (typeof value === 'string' && key !== 'authorization' && key !== 'cookie')
      headers[key] = value;
  }
  return headers;
}
