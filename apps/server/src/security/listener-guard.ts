import http from 'node:http';
import type { Socket } from 'node:net';
import { watchChunkedRequest } from './chunk-size-guard.js';

export interface ListenerLimits {
  /** Open connections at most; the next ones get a JSON 503 and are closed. */
  readonly maxConnections: number;
  /** ms for the request line and headers to arrive (slowloris). */
  readonly headersTimeoutMs: number;
  /** ms for a whole request; the body reader answers 408 first, this is the backstop. */
  readonly requestTimeoutMs: number;
  /** Largest body accepted: a chunk announcing more is refused as soon as its size arrives. */
  readonly maxBodyBytes: number;
}

/**
 * Creates an HTTP server that answers in JSON even where Node's own parser or timers would
 * answer with an empty body or silently drop the socket: malformed framing (400), headers
 * too large (431), too slow (408), chunks announcing more than the body limit (413), and
 * connections past the cap (503).
 */
export function createGuardedServer(
  handler: http.RequestListener,
  limits: ListenerLimits,
  /** The class of the server's answers (see ConnectionDrain); Node's own by default. */
  ServerResponse: typeof http.ServerResponse = http.ServerResponse,
): http.Server {
  // Node checks the timeouts on this interval; its 30 s default would let them overrun.
  const guarded: http.RequestListener = (req, res) => {
    const chunked = req.headers['transfer-encoding'] !== undefined;
    if (chunked && watchChunkedRequest(req, limits.maxBodyBytes, refuseChunk).refused) return;
    handler(req, res);
  };
  const server = http.createServer({ connectionsCheckingInterval: 1000, ServerResponse }, guarded);
  server.headersTimeout = limits.headersTimeoutMs;
  // A margin, so that the body reader's own 408 (with a JSON body) wins the race.
  server.requestTimeout = limits.requestTimeoutMs + 5000;
  server.on('clientError', answerClientError);
  let open = 0;
  server.on('connection', (socket: Socket) => {
    open++;
    socket.once('close', () => open--);
    if (open > limits.maxConnections) {
      socket.end(
        rawJsonResponse(503, 'ServiceUnavailable', 'too many open connections; retry later', {
          'Retry-After': '1',
        }),
      );
      socket.destroySoon();
    }
  });
  return server;
}

function refuseChunk(socket: Socket): void {
  const response = (socket as Socket & { _httpMessage?: http.ServerResponse })._httpMessage;
  if (socket.writable && !response?.headersSent) {
    socket.end(
      rawJsonResponse(
        413,
        'PayloadTooLarge',
        'a chunk of the request body announces more than max_request_size',
      ),
    );
    socket.destroySoon();
  } else {
    socket.destroy();
  }
}

/** Answers what Node's HTTP parser refused before any handler saw the request. */
function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  const response = (socket as Socket & { _httpMessage?: http.ServerResponse })._httpMessage;
  if (!socket.writable || response?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, type, message] = clientErrorAnswer(error.code);
  if (status === undefined) {
    socket.destroy();
    return;
  }
  socket.end(rawJsonResponse(status, type, message));
  socket.destroySoon();
}

function clientErrorAnswer(code: string | undefined): [number | undefined, string, string] {
  switch (code) {
    case 'ECONNRESET':
    case 'EPIPE':
      return [undefined, '', ''];
    case 'HPE_HEADER_OVERFLOW':
      return [431, 'RequestHeaderFieldsTooLarge', 'request headers are too large'];
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [408, 'RequestTimeout', 'request took too long to arrive'];
    default:
      return [400, 'BadRequest', 'malformed HTTP request'];
  }
}

/** A complete HTTP/1.1 answer with a DJL-style JSON error body, written straight to a socket. */
export function rawJsonResponse(
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): string {
  const body = JSON.stringify({ code: status, type, message });
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return (
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `${extra}Connection: close\r\n\r\n${body}`
  );
}
