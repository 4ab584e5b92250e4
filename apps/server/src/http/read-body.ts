import type { IncomingMessage } from 'node:http';
import busboy from 'busboy';
import { KilnError, KilnErrorCode } from '@kiln/core';

export interface BodyLimits {
  /** Bytes. A declared or streamed body past it is refused with PAYLOAD_TOO_LARGE. */
  maxBytes: number;
  /** What the 413 names as the limit; `max_request_size` unless said. */
  maxBytesName?: string;
  /** ms to receive the whole body (408 past it). */
  timeoutMs: number;
  /** ms the client may stay silent between two reads (nginx's client_body_timeout; 408 past it). */
  idleTimeoutMs: number;
}

/**
 * Watches one body as it arrives: its size against the limit, the whole time and the
 * silence between reads. `fail` is called at most once, with the error to answer.
 */
function watchBody(
  req: IncomingMessage,
  limits: BodyLimits,
  fail: (error: KilnError) => void,
): { count(bytes: number): boolean; stop(): void } {
  let received = 0;
  const slow = (what: string) => () =>
    fail(new KilnError(KilnErrorCode.RequestTimeout, `request body ${what}`));
  // A body already received whole (most small ones: they come with the headers) has nothing
  // left to wait for: no timers to arm and clear.
  const arriving = !req.complete;
  const whole = arriving
    ? setTimeout(slow('took too long to arrive'), limits.timeoutMs)
    : undefined;
  const idle = arriving
    ? setTimeout(slow(`stalled for more than ${limits.idleTimeoutMs} ms`), limits.idleTimeoutMs)
    : undefined;
  const onClose = () => {
    if (!req.complete) fail(new KilnError(KilnErrorCode.Cancelled, 'client closed the request'));
  };
  const onError = (error: unknown) => fail(bodyError(error));
  req.on('close', onClose);
  req.on('error', onError);
  // Read late (the request waited for a turn with time), its client may be gone already: Node
  // has then destroyed the request and dropped what it held, and no event is left to come.
  if (req.destroyed) {
    process.nextTick(() =>
      fail(new KilnError(KilnErrorCode.Cancelled, 'client closed the request')),
    );
  }
  return {
    count(bytes) {
      idle?.refresh();
      received += bytes;
      if (received <= limits.maxBytes) return true;
      fail(tooLarge(limits));
      return false;
    },
    stop() {
      clearTimeout(whole);
      clearTimeout(idle);
      req.off('close', onClose);
      // Late errors of a request already answered must still have a listener.
      req.off('error', onError);
      req.on('error', ignore);
    },
  };
}

function ignore(): void {}

/**
 * The chunks joined into a buffer of their own (the one copy of a body). Never a slice of
 * Node's shared Buffer pool: the request owns it, so a worker pool can move it to its thread.
 * With `alignAt`, the body starts just far enough into its buffer that byte `alignAt` of the
 * body falls on an 8-byte boundary: binary tensor data from there on is viewed, not copied.
 */
function joinOwned(chunks: readonly Buffer[], total?: number, alignAt?: number): Buffer {
  const length = total ?? chunks.reduce((sum, c) => sum + c.length, 0);
  const pad = alignAt === undefined ? 0 : (8 - (alignAt % 8)) % 8;
  // Not zero-filled: every byte is copied over (a zeroed 600 kB body cost its own pass).
  const owned = Buffer.allocUnsafeSlow(pad + length);
  const out = pad === 0 ? owned : owned.subarray(pad);
  let offset = 0;
  for (const chunk of chunks) offset += chunk.copy(out, offset);
  return out;
}

/** A form field's text as bytes in a buffer of its own (not Node's shared pool). */
function ownedText(value: string): Buffer {
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(value));
  bytes.write(value);
  return bytes;
}

/**
 * Reads a request body into memory, refusing it before buffering when Content-Length is too
 * large, stopping at the limit when the length is not declared, and answering 408 to a
 * client that sends too slowly. A refused body is left unread: the error answer closes the
 * connection.
 */
export function readBody(
  req: IncomingMessage,
  limits: BodyLimits,
  options: { alignAt?: number } = {},
): Promise<Buffer> {
  const declared = declaredLength(req, limits);
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let settled = false;
    const settle = (error: KilnError | undefined) => {
      if (settled) return;
      settled = true;
      watch.stop();
      req.off('data', onData);
      req.off('end', onEnd);
      if (error) {
        req.pause();
        reject(error);
        return;
      }
      resolve(joinOwned(chunks, total, options.alignAt));
    };
    const watch = watchBody(req, limits, settle);
    const onData = (chunk: Buffer) => {
      if (!watch.count(chunk.length)) return;
      chunks.push(chunk);
      total += chunk.length;
    };
    const onEnd = () =>
      settle(
        declared !== undefined && total !== declared
          ? new KilnError(
              KilnErrorCode.InvalidInput,
              'request body is shorter or longer than its Content-Length',
            )
          : undefined,
      );
    req.on('data', onData);
    req.on('end', onEnd);
  });
}

export interface BodyPart {
  readonly name: string;
  readonly contentType: string | undefined;
  readonly filename: string | undefined;
  readonly data: Buffer;
}

/** Reads a multipart/form-data body into its parts, with the same limits. */
export async function readMultipart(req: IncomingMessage, limits: BodyLimits): Promise<BodyPart[]> {
  declaredLength(req, limits);
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
  } catch {
    throw new KilnError(KilnErrorCode.InvalidInput, 'malformed multipart request');
  }
  return new Promise<BodyPart[]>((resolve, reject) => {
    const parts: BodyPart[] = [];
    let settled = false;
    const settle = (error: KilnError | undefined) => {
      if (settled) return;
      settled = true;
      watch.stop();
      req.unpipe(parser);
      // Whatever the parser still emits after the answer must not reach an unhandled 'error'.
      parser.on('error', ignore);
      if (error) {
        req.pause();
        reject(error);
      } else {
        resolve(parts);
      }
    };
    const watch = watchBody(req, limits, settle);
    const malformed = () =>
      settle(new KilnError(KilnErrorCode.InvalidInput, 'malformed multipart request'));
    parser.on('field', (name, value, info) => {
      if (!watch.count(Buffer.byteLength(value))) return;
      parts.push({
        name,
        contentType: info.mimeType === 'text/plain' ? undefined : info.mimeType,
        filename: undefined,
        data: ownedText(value),
      });
    });
    parser.on('file', (name, stream, info) => {
      const chunks: Buffer[] = [];
      // A part cut off before its closing boundary errors its stream: answer 400, never crash.
      stream.on('error', malformed);
      stream.on('data', (chunk: Buffer) => {
        if (watch.count(chunk.length)) chunks.push(chunk);
      });
      stream.on('limit', () => settle(tooLarge(limits)));
      stream.on('end', () =>
        parts.push({
          name,
          contentType: info.mimeType,
          filename: info.filename,
          data: joinOwned(chunks),
        }),
      );
    });
    parser.on('partsLimit', () =>
      settle(new KilnError(KilnErrorCode.InvalidInput, 'too many multipart parts')),
    );
    parser.on('filesLimit', () =>
      settle(new KilnError(KilnErrorCode.InvalidInput, 'too many multipart files')),
    );
    parser.on('fieldsLimit', () =>
      settle(new KilnError(KilnErrorCode.InvalidInput, 'too many multipart fields')),
    );
    parser.on('error', malformed);
    parser.on('close', () => settle(undefined));
    req.pipe(parser);
  });
}

/** The declared Content-Length, refused at once when it is over the limit. */
function declaredLength(req: IncomingMessage, limits: BodyLimits): number | undefined {
  const header = req.headers['content-length'];
  if (header === undefined) return undefined;
  const length = Number(header);
  if (length > limits.maxBytes) throw tooLarge(limits);
  return length;
}

function tooLarge(limits: BodyLimits): KilnError {
  return new KilnError(
    KilnErrorCode.PayloadTooLarge,
    `request body exceeds ${limits.maxBytesName ?? 'max_request_size'} (${limits.maxBytes} bytes)`,
  );
}

function bodyError(error: unknown): KilnError {
  if (error instanceof KilnError) return error;
  const code = (error as { code?: string }).code;
  if (code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE')
    return new KilnError(KilnErrorCode.Cancelled, 'client closed the request');
  return new KilnError(KilnErrorCode.InvalidInput, 'cannot read request body');
}
