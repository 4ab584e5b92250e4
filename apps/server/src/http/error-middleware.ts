import type { IncomingMessage } from 'node:http';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { redactPaths } from '../security/redact-paths.js';
import { type ErrorMappingOptions, toHttpError } from './error-status.js';
import { openAiErrorBody } from './openai-error.js';

/**
 * Which error body an API speaks: DJL's `{code, type, message}`, v2's `{error}` or OpenAI's
 * `{error: {message, type, param, code}}`.
 */
export type ErrorStyle = 'djl' | 'v2' | 'openai';

/**
 * The style of a path no route claimed (an unknown route, a method the route lacks): that of
 * the API its prefix names.
 */
function styleOfPath(path: string): ErrorStyle | undefined {
  if (path.startsWith('/v1/')) return 'openai';
  if (path.startsWith('/v2/')) return 'v2';
  return undefined;
}

/**
 * Catches everything a route throws and answers with a JSON error of the route's style.
 * Messages of KilnErrors are shown without server paths; anything else is logged and answered
 * as a bare 500. Answers Koa or the router leave without a body (405, 501) get one too.
 */
export function errorMiddleware(options: ErrorMappingOptions, log: Logger): Middleware {
  return async (ctx, next) => {
    const style = () => (ctx.state.errorStyle as ErrorStyle | undefined) ?? styleOfPath(ctx.path);
    try {
      await next();
      if (ctx.status === 404 && ctx.body == null) {
        respond(ctx, 404, `no route for ${ctx.method} ${ctx.path}`, 'NotFound', style());
      } else if (ctx.status >= 400 && ctx.body == null) {
        const [type, message] = BODYLESS[ctx.status] ?? ['Error', `request failed (${ctx.status})`];
        respond(ctx, ctx.status, message, type, style());
      }
    } catch (error) {
      const answer = errorAnswer(error, ctx.req, ctx.path, options, log);
      for (const [name, value] of Object.entries(answer.headers)) ctx.set(name, value);
      respond(ctx, answer.status, answer.message, answer.type, style(), error);
      ctx.state.errorCode = answer.code;
    }
  };
}

/** How a failed request is answered, whichever path served it. */
export interface ErrorAnswer {
  readonly status: number;
  readonly type: string;
  /** Without server paths. */
  readonly message: string;
  readonly code: string;
  readonly headers: Readonly<Record<string, string>>;
}

/** Maps what a route threw to its answer; unexpected errors are logged (they answer a bare 500). */
export function errorAnswer(
  error: unknown,
  req: IncomingMessage,
  path: string,
  options: ErrorMappingOptions,
  log: Logger,
): ErrorAnswer {
  const mapped = toHttpError(error, options);
  if (mapped.status >= 500 && mapped.code === 'INTERNAL')
    log.error({ err: error, path }, 'request failed');
  const headers: Record<string, string> = {};
  if (mapped.retryAfterS !== undefined) headers['Retry-After'] = String(mapped.retryAfterS);
  // A body left unread (too large, too slow) is not worth reading: close after answering.
  if (!req.complete && (req.readableDidRead || mapped.status === 413)) headers.Connection = 'close';
  return {
    status: mapped.status,
    type: mapped.type,
    message: redactPaths(mapped.message),
    code: mapped.code,
    headers,
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
  error?: unknown,
): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = errorBody(status, message, type, style, error);
}

/**
 * An error's JSON body in an API's style: DJL's `{code, type, message}`, v2's `{error}`, or
 * OpenAI's, which also names the field and code that `error` (what was thrown) carries.
 */
export function errorBody(
  status: number,
  message: string,
  type: string,
  style: ErrorStyle | undefined,
  error?: unknown,
): object {
  if (style === 'openai') return openAiErrorBody(status, message, error);
  return style === 'v2' ? { error: message } : { code: status, type, message };
}
