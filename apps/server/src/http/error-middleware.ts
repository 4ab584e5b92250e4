import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { redactPaths } from '../security/redact-paths.js';
import { type ErrorMappingOptions, toHttpError } from './error-status.js';

/** Which error body an API speaks: DJL's `{code, type, message}` or v2's `{error}`. */
export type ErrorStyle = 'djl' | 'v2';

/**
 * Catches everything a route throws and answers with a JSON error of the route's style.
 * Messages of KilnErrors are shown without server paths; anything else is logged and answered
 * as a bare 500. Answers Koa or the router leave without a body (405, 501) get one too.
 */
export function errorMiddleware(options: ErrorMappingOptions, log: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body == null) {
        respond(
          ctx,
          404,
          `no route for ${ctx.method} ${ctx.path}`,
          'NotFound',
          ctx.state.errorStyle,
        );
      } else if (ctx.status >= 400 && ctx.body == null) {
        const [type, message] = BODYLESS[ctx.status] ?? ['Error', `request failed (${ctx.status})`];
        respond(ctx, ctx.status, message, type, ctx.state.errorStyle);
      }
    } catch (error) {
      const mapped = toHttpError(error, options);
      if (mapped.status >= 500 && mapped.code === 'INTERNAL')
        log.error({ err: error, path: ctx.path }, 'request failed');
      if (mapped.retryAfterS !== undefined) ctx.set('Retry-After', String(mapped.retryAfterS));
      // A body left unread (too large, too slow) is not worth reading: close after answering.
      if (!ctx.req.complete && (ctx.req.readableDidRead || mapped.status === 413))
        ctx.set('Connection', 'close');
      respond(ctx, mapped.status, redactPaths(mapped.message), mapped.type, ctx.state.errorStyle);
      ctx.state.errorCode = mapped.code;
    }
  };
}

/** What the router answers without a body. */
const BODYLESS: Record<number, [string, string]> = {
  405: ['MethodNotAllowed', 'method not allowed on this route'],
  501: ['NotImplemented', 'this HTTP method is not supported'],
};

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
