import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { type ErrorMappingOptions, toHttpError } from './error-status.js';

/** Which error body an API speaks: DJL's `{code, type, message}` or v2's `{error}`. */
export type ErrorStyle = 'djl' | 'v2';

/**
 * Catches everything a route throws and answers with a JSON error of the route's style.
 * Messages of KilnErrors are shown; anything else is logged and answered as a bare 500.
 */
export function errorMiddleware(options: ErrorMappingOptions, log: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        respond(
          ctx,
          404,
          `no route for ${ctx.method} ${ctx.path}`,
          'NotFound',
          ctx.state.errorStyle,
        );
      }
    } catch (error) {
      const mapped = toHttpError(error, options);
      if (mapped.status >= 500 && mapped.code === 'INTERNAL')
        log.error({ err: error, path: ctx.path }, 'request failed');
      if (mapped.retryAfterS !== undefined) ctx.set('Retry-After', String(mapped.retryAfterS));
      respond(ctx, mapped.status, mapped.message, mapped.type, ctx.state.errorStyle);
      ctx.state.errorCode = mapped.code;
    }
  };
}

function respond(
  ctx: Parameters<Middleware>[0],
  status: number,
  message: string,
  type: string,
  style: ErrorStyle | undefined,
): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = style === 'v2' ? { error: message } : { code: status, type, message };
}
