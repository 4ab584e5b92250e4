import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';
import busboy from 'busboy';
import { KilnError, KilnErrorCode } from '@kiln/core';

export interface BodyLimits {
  /** Bytes. A declared or streamed body past it is refused with PAYLOAD_TOO_LARGE. */
  maxBytes: number;
  /** ms to receive the whole body. */
  timeoutMs: number;
}

/**
 * Reads a request body into memory, refusing it before buffering when Content-Length is too
 * large and stopping at the limit when the length is not declared.
 */
export async function readBody(req: IncomingMessage, limits: BodyLimits): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limits.maxBytes) {
    throw tooLarge(limits.maxBytes);
  }
  const timer = setTimeout(
    () => req.destroy(new KilnError(KilnErrorCode.Timeout, 'request body took too long to arrive')),
    limits.timeoutMs,
  );
  try {
    return await getRawBody(req, { limit: limits.maxBytes, length: declared });
  } catch (error) {
    throw bodyError(error, limits.maxBytes);
  } finally {
    clearTimeout(timer);
  }
}

export interface BodyPart {
  readonly name: string;
  readonly contentType: string | undefined;
  readonly filename: string | undefined;
  readonly data: Buffer;
}

/** Reads a multipart/form-data body into its parts, with the same total limit. */
export async function readMultipart(req: IncomingMessage, limits: BodyLimits): Promise<BodyPart[]> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limits.maxBytes) throw tooLarge(limits.maxBytes);
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: req.headers,
      limits: {
        fileSize: limits.maxBytes,
        fields: 64,
        files: 64,
        parts: 128,
        fieldSize: limits.maxBytes,
      },
    });
  } catch (error) {
    throw KilnError.wrap(error, KilnErrorCode.InvalidInput, 'malformed multipart request');
  }
  return new Promise<BodyPart[]>((resolve, reject) => {
    const parts: BodyPart[] = [];
    let total = 0;
    let failed = false;
    const fail = (error: KilnError) => {
      if (failed) return;
      failed = true;
      req.unpipe(parser);
      req.resume();
      reject(error);
    };
    const timer = setTimeout(
      () => fail(new KilnError(KilnErrorCode.Timeout, 'request body took too long to arrive')),
      limits.timeoutMs,
    );
    const count = (n: number) => {
      total += n;
      if (total > limits.maxBytes) fail(tooLarge(limits.maxBytes));
    };
    parser.on('field', (name, value, info) => {
      count(Buffer.byteLength(value));
      parts.push({
        name,
        contentType: info.mimeType === 'text/plain' ? undefined : info.mimeType,
        filename: undefined,
        data: Buffer.from(value),
      });
    });
    parser.on('file', (name, stream, info) => {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        count(chunk.length);
        if (!failed) chunks.push(chunk);
      });
      stream.on('limit', () => fail(tooLarge(limits.maxBytes)));
      stream.on('end', () =>
        parts.push({
          name,
          contentType: info.mimeType,
          filename: info.filename,
          data: Buffer.concat(chunks),
        }),
      );
    });
    parser.on('partsLimit', () =>
      fail(new KilnError(KilnErrorCode.InvalidInput, 'too many multipart parts')),
    );
    parser.on('filesLimit', () =>
      fail(new KilnError(KilnErrorCode.InvalidInput, 'too many multipart files')),
    );
    parser.on('fieldsLimit', () =>
      fail(new KilnError(KilnErrorCode.InvalidInput, 'too many multipart fields')),
    );
    parser.on('error', (error: unknown) =>
      fail(KilnError.wrap(error, KilnErrorCode.InvalidInput, 'malformed multipart request')),
    );
    parser.on('close', () => {
      clearTimeout(timer);
      if (!failed) resolve(parts);
    });
    req.on('error', (error) => fail(bodyError(error, limits.maxBytes)));
    req.pipe(parser);
  });
}

function tooLarge(maxBytes: number): KilnError {
  return new KilnError(
    KilnErrorCode.PayloadTooLarge,
    `request body exceeds max_request_size (${maxBytes} bytes)`,
  );
}

function bodyError(error: unknown, maxBytes: number): KilnError {
  if (error instanceof KilnError) return error;
  const type = (error as { type?: string }).type;
  if (type === 'entity.too.large') return tooLarge(maxBytes);
  if (type === 'request.size.invalid')
    return new KilnError(
      KilnErrorCode.InvalidInput,
      'request body is shorter or longer than its Content-Length',
    );
  if (type === 'request.aborted')
    return new KilnError(KilnErrorCode.Cancelled, 'client closed the request');
  return KilnError.wrap(error, KilnErrorCode.InvalidInput, 'cannot read request body');
}
