import type { IncomingMessage } from 'node:http';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';

/** One structured JSON line per request. */
export function accessLog(log: Logger, api: string): Middleware {
  return async (ctx, next) => {
    const start = performance.now();
    try {
      await next();
    } finally {
      logAccess(log, ctx.req, {
        api,
        path: ctx.path,
        status: ctx.status,
        start,
        model: ctx.state.model,
        code: ctx.state.errorCode,
        remote: ctx.ip,
      });
    }
  };
}

/** Writes a request's access-log line, whichever path served it. */
export function logAccess(
  log: Logger,
  req: IncomingMessage,
  answered: {
    api: string;
    path: string;
    status: number;
    start: number;
    model: unknown;
    code: unknown;
    remote: string | undefined;
  },
): void {
  log.info(
    {
      api: answered.api,
      method: req.method,
      path: answered.path,
      status: answered.status,
      ms: Math.round((performance.now() - answered.start) * 100) / 100,
      bytesIn: Number(req.headers['content-length']) || 0,
      model: answered.model,
      code: answered.code,
      remote: answered.remote,
    },
    'request',
  );
}
