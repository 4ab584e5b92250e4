import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Follows HTTP/1.1 framing on a connection's raw bytes, beside Node's parser, to see chunk
 * sizes, which Node never reports: a `Transfer-Encoding: chunked` body announcing a chunk
 * larger than `maxBytes` (`FFFFFFFFFFFFFFFF`) is refused at once, as nginx does, instead of
 * holding the connection until a timeout. Anything it does not understand makes it stop
 * watching that connection; it never refuses what it cannot read.
 *
 * Called from the `request` event of a request with a chunked body: a connection is watched
 * only from its first chunked request on. Watching takes the connection's reads away from
 * Node's native parser into JavaScript (about a fifth more main-thread time per small
 * request), so connections that never send a chunked body are left alone. The bytes that came
 * with the headers have already gone to the parser by then; Node emits `request` while its
 * parser is still inside that read, and the read is taken from the parser
 * (`getCurrentBuffer`).
 */
export function watchChunkedRequest(
  req: IncomingMessage,
  maxBytes: number,
  refuse: (socket: Socket) => void,
): { refused: boolean } {
  const socket = req.socket;
  if (watched.has(socket)) return { refused: false };
  watched.add(socket);
  const scanner = new FramingScanner(maxBytes);
  const read = currentRead(socket);
  const verdict = read
    ? scanner.startAt(read, `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`)
    : scanner.startInChunkedBody();
  if (verdict === 'too-large') {
    refuse(socket);
    return { refused: true };
  }
  // Unreadable framing: this connection is not watched again (the scanner never guesses).
  if (verdict === 'lost') return { refused: false };
  const onData = (chunk: Buffer) => {
    const next = scanner.push(chunk);
    if (next === 'ok') return;
    socket.off('data', onData);
    if (next === 'too-large') refuse(socket);
  };
  socket.on('data', onData);
  return { refused: false };
}

const watched = new WeakSet<Socket>();

/** The read Node's HTTP parser is executing (during `request`), when this Node tells. */
function currentRead(socket: Socket): Buffer | undefined {
  const parser = (socket as Socket & { parser?: { getCurrentBuffer?: () => unknown } }).parser;
  const read = parser?.getCurrentBuffer?.();
  return Buffer.isBuffer(read) ? read : undefined;
}

type Verdict = 'ok' | 'too-large' | 'lost';

const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');
/** Longer lines are not framing Node would accept either: stop watching. */
const MAX_LINE = 8 * 1024;
const MAX_HEAD = 64 * 1024;

export class FramingScanner {
  private state: 'head' | 'fixed' | 'size' | 'data' | 'trailers' = 'head';
  private pending = Buffer.alloc(0);
  /** Bytes of body (fixed) or chunk data (+ its CRLF) still to skip. */
  private skip = 0;

  constructor(private readonly maxBytes: number) {}

  /**
   * Starts on a read that completed a request's head: from that head when the read holds its
   * request line, or else (the head began in an earlier read) from the blank line ending it.
   */
  startAt(read: Buffer, requestLine: string): Verdict {
    const at = read.indexOf(requestLine, 0, 'latin1');
    if (at >= 0) return this.push(read.subarray(at));
    const end = read.indexOf(HEAD_END);
    if (end < 0) return 'lost';
    return this.startInChunkedBody(read.subarray(end + HEAD_END.length));
  }

  /** Starts inside a chunked body, at a chunk-size line. */
  startInChunkedBody(bytes: Buffer = Buffer.alloc(0)): Verdict {
    this.state = 'size';
    return this.push(bytes);
  }

  push(chunk: Buffer): Verdict {
    let bytes = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = Buffer.alloc(0);
    for (;;) {
      if (this.state === 'fixed' || this.state === 'data') {
        const taken = Math.min(this.skip, bytes.length);
        this.skip -= taken;
        bytes = bytes.subarray(taken);
        if (this.skip > 0) return 'ok';
        this.state = this.state === 'fixed' ? 'head' : 'size';
        continue;
      }
      if (bytes.length === 0) return 'ok';
      if (this.state === 'head') {
        const end = bytes.indexOf(HEAD_END);
        if (end < 0) return this.keep(bytes, MAX_HEAD);
        const head = bytes.subarray(0, end).toString('latin1');
        bytes = bytes.subarray(end + 4);
        const framing = bodyFraming(head);
        if (framing === undefined) return 'lost';
        if (framing === 'chunked') this.state = 'size';
        else if (framing > 0) {
          this.state = 'fixed';
          this.skip = framing;
        }
        continue;
      }
      const eol = bytes.indexOf(CRLF);
      if (eol < 0) return this.keep(bytes, MAX_LINE);
      const line = bytes.subarray(0, eol).toString('latin1');
      bytes = bytes.subarray(eol + 2);
      if (this.state === 'trailers') {
        if (line === '') this.state = 'head';
        continue;
      }
      const hex = /^([0-9a-fA-F]+)[ \t]*(?:;.*)?$/.exec(line)?.[1];
      if (hex === undefined) return 'lost';
      // Past 13 hex digits the size cannot be a safe integer, let alone an acceptable body.
      const size = hex.replace(/^0+/, '').length > 13 ? Infinity : parseInt(hex, 16);
      if (size > this.maxBytes) return 'too-large';
      if (size === 0) this.state = 'trailers';
      else {
        this.state = 'data';
        this.skip = size + 2;
      }
    }
  }

  private keep(bytes: Buffer, limit: number): Verdict {
    if (bytes.length > limit) return 'lost';
    this.pending = Buffer.from(bytes);
    return 'ok';
  }
}

/** How a request's body is framed: `chunked`, a byte count, or undefined when unclear. */
function bodyFraming(head: string): 'chunked' | number | undefined {
  let length: number | undefined;
  let chunked = false;
  for (const line of head.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    if (colon < 0) return undefined;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'transfer-encoding') chunked = /(?:^|,)\s*chunked\s*$/i.test(value);
    else if (name === 'content-length') {
      if (!/^\d+$/.test(value) || length !== undefined) return undefined;
      length = Number(value);
    }
  }
  if (chunked) return length === undefined ? 'chunked' : undefined;
  return length ?? 0;
}
