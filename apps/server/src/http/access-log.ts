import type { Middleware } from 'koa';
import type { Logger } from 'pino';

/** One structured JSON line per request. */
export function accessLog(log: Logger, api: string): Middleware {
  return async (ctx, next) => {
    const start = performance.now();
    try {
      await next();
    } finally {
      log.info(
        {
          api,
          method: ctx.method,
          path: ctx.path,
          status: ctx.status,
          ms: Math.round((performance.now() - start) * 100) / 100,
          bytesIn: Number(ctx.get('content-length')) || 0,
          model: ctx.state.model,
          code: ctx.state.errorCode,
          remote: ctx.ip,
        },
        'request',
      );
    }
  };
}
