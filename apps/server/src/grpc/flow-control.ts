import type http2 from 'node:http2';
import type { Server } from '@grpc/grpc-js';

/**
 * What a client may send before the listener acknowledges it, per call and per connection.
 * HTTP/2 starts both at 64 KiB, so a 600 kB tensor waits for about ten window updates, each
 * a turn of this thread's event loop, and calls that share a connection take turns in one
 * window. gRPC's Java servers start at 1 MiB; the connection's window is left room for several
 * such calls at once. What is buffered per call stays bounded by max_request_size.
 */
export const GRPC_STREAM_WINDOW_BYTES = 1 << 20;
export const GRPC_CONNECTION_WINDOW_BYTES = 8 << 20;

/**
 * Gives the server's connections the windows above. grpc-js reads its flow-control option on
 * the client side only (its server always keeps HTTP/2's 64 KiB: grpc/grpc-node#3058), so this
 * sets them where its server makes its HTTP/2 servers: their settings (each call's window) and
 * each new connection (its own window). Returns false, changing nothing, where those are not
 * found (a grpc-js whose server is built otherwise); test/grpc checks the windows a client sees.
 */
export function widenFlowControlWindows(grpc: Server): boolean {
  const internals = grpc as unknown as {
    commonServerOptions?: http2.ServerOptions;
    createHttp2Server?: (credentials: unknown) => http2.Http2Server;
  };
  const create = internals.createHttp2Server;
  const options = internals.commonServerOptions;
  if (typeof create !== 'function' || typeof options !== 'object' || options === null) return false;
  options.settings = { ...options.settings, initialWindowSize: GRPC_STREAM_WINDOW_BYTES };
  internals.createHttp2Server = (credentials) => {
    const server = create.call(grpc, credentials);
    server.on('session', (session) => session.setLocalWindowSize(GRPC_CONNECTION_WINDOW_BYTES));
    return server;
  };
  return true;
}
