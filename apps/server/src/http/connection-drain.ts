import http from 'node:http';
import type { Socket } from 'node:net';

/** How often a closing listener closes the connections that went idle since it last looked. */
const IDLE_SWEEP_MS = 100;

/**
 * The HTTP listeners' side of a server's drain. From `start()` on, every answer — to a request
 * that arrived before as well as after — says `Connection: close` and ends its connection, so
 * that keep-alive clients reconnect (to another server, or to find this one gone) rather than
 * go on sending on a connection to a server that is stopping.
 */
export class ConnectionDrain {
  private draining = false;
  private readonly listeners: http.Server[] = [];
  private readonly sockets = new Set<Socket>();
  /**
   * The listeners' http.ServerResponse: it adds `Connection: close` to answers written once
   * the drain started. Node writes every answer's head through writeHead (res.end without it
   * included), so that Koa's answers and the fast path's are both covered.
   */
  readonly ServerResponse: typeof http.ServerResponse;

  constructor() {
    const isDraining = () => this.draining;
    const writeHead = http.ServerResponse.prototype.writeHead as (
      this: http.ServerResponse,
      ...args: unknown[]
    ) => http.ServerResponse;
    class DrainingResponse extends http.ServerResponse {}
    DrainingResponse.prototype.writeHead = function (
      this: http.ServerResponse,
      ...args: unknown[]
    ) {
      if (isDraining() && !this.headersSent) this.setHeader('Connection', 'close');
      return writeHead.apply(this, args);
    } as http.ServerResponse['writeHead'];
    this.ServerResponse = DrainingResponse as typeof http.ServerResponse;
  }

  /** Drains `listener`'s connections with the others (made with `ServerResponse`). */
  watch(listener: http.Server): void {
    this.listeners.push(listener);
    listener.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  /**
   * Every answer from now on closes its connection, and idle connections close now. Resolves
   * once the requests in progress now — accepted before the drain — are answered (or their
   * clients gone), so that the models they wait for can be stopped.
   */
  start(): Promise<void> {
    this.draining = true;
    const answering: Promise<void>[] = [];
    for (const socket of this.sockets) {
      // Node's answer in progress on a connection (as listener-guard reads it too).
      const response = (socket as Socket & { _httpMessage?: http.ServerResponse | null })
        ._httpMessage;
      if (response && !response.writableFinished && !response.destroyed)
        answering.push(new Promise((resolve) => response.once('close', () => resolve())));
    }
    for (const listener of this.listeners) listener.closeIdleConnections();
    return Promise.all(answering).then(() => undefined);
  }
}

/**
 * Stops listening and resolves once every connection is closed: idle ones at once, busy ones
 * once their answer is written (the drain has them close), and those still open after
 * `timeoutMs` are cut, whatever their clients do.
 */
export function closeListener(listener: http.Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    // An answer whose head was written before the drain leaves its connection open, idle.
    const sweep = setInterval(() => listener.closeIdleConnections(), IDLE_SWEEP_MS);
    const cut = setTimeout(() => listener.closeAllConnections(), timeoutMs);
    listener.close(() => {
      clearInterval(sweep);
      clearTimeout(cut);
      resolve();
    });
    listener.closeIdleConnections();
  });
}
