import type http from 'node:http';
import { finished } from 'node:stream/promises';
import { contentType as fullContentType } from 'mime-types';
import { type ServerContext, bodyLimits } from '../routes/server-context.js';
import { type HostPolicy, checkHostAndOrigin } from '../security/host-origin.js';
import { logAccess } from './access-log.js';
import { errorAnswer, errorBody } from './error-middleware.js';
import type { ErrorMappingOptions } from './error-status.js';
import { recordRequest } from './request-metrics.js';
import type { BodyLimits } from './read-body.js';
import { servingAnswer, servingInputFrom } from './serving-request.js';
import { type ChunkedAnswer, mayStream, startAnswer } from './streamed-answer.js';
import type { TurnBudget } from './turn-budget.js';

/** The one route a server answers most, in the names @koa/router gives its patterns. */
const PREDICTION =
  /^\/predictions\/([A-Za-z0-9][A-Za-z0-9_.-]{0,127})(?:\/([A-Za-z0-9_.-]{1,128}))?$/;
const ROUTE = '/predictions/:model';
const VERSIONED_ROUTE = '/predictions/:model/:version';

export interface FastPredictionsContext {
  readonly server: ServerContext;
  /** The inference listener's Host and Origin policy. */
  readonly hosts: HostPolicy;
  readonly errors: ErrorMappingOptions;
  /** Bounds the request work of one event-loop turn (see TurnBudget); none when undefined. */
  readonly budget?: TurnBudget | undefined;
}

/**
 * The inference listener's hot route, `POST /predictions/{model}[/{version}]`, answered without
 * Koa: Koa's middleware and four routers cost the main thread about a sixth of a small model's
 * request. It answers as the Koa route does — same body reading and limits, errors, headers,
 * metrics and access log — for requests that route would serve. Everything else (other routes
 * and methods, query strings, unregistered or text-generating models, hosts or origins this
 * listener refuses, a server shutting down) goes to Koa, which answers it as before.
 */
export function fastPredictions(
  context: FastPredictionsContext,
  koa: http.RequestListener,
): http.RequestListener {
  // Fixed for the server's life: made once, not per request.
  const { server } = context;
  const route: PredictRoute = {
    ...context,
    limits: bodyLimits(server),
    isRegistered: (model) => server.models.has(model),
  };
  return (req, res) => {
    const match = req.method === 'POST' ? PREDICTION.exec(req.url ?? '') : null;
    if (!match || !servesHere(context, req, match[1]!, match[2])) {
      koa(req, res);
      return;
    }
    // Failures are answered inside; this only keeps a fault in the bookkeeping from
    // becoming an unhandled rejection.
    predict(route, req, res, match[1]!, match[2]).catch((error: unknown) =>
      server.log.error({ err: error }, 'prediction bookkeeping failed'),
    );
  };
}

interface PredictRoute extends FastPredictionsContext {
  readonly limits: BodyLimits;
  readonly isRegistered: (model: string) => boolean;
}

/** Whether the Koa route would run the model: the request passes the checks ahead of it. */
function servesHere(
  { server, hosts }: FastPredictionsContext,
  req: http.IncomingMessage,
  name: string,
  version: string | undefined,
): boolean {
  if (!server.accepting) return false;
  try {
    checkHostAndOrigin(hosts, req.headers.host || undefined, req.headers.origin || undefined);
    return server.models.get(name, version).kind !== 'step';
  } catch {
    return false;
  }
}

async function predict(
  { server, errors, limits, isRegistered, budget }: PredictRoute,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  name: string,
  version: string | undefined,
): Promise<void> {
  const { metrics, log } = server;
  const start = performance.now();
  const path = req.url!;
  let status = 200;
  let code: string | undefined;
  try {
    // Under load, the rest of this turn belongs to work that came first (see TurnBudget).
    const before = budget?.turn();
    if (before) await before;
    // A model that cannot take the request is refused before the body is read: a client that
    // retries a large body while the model loads costs the server little more than headers.
    server.models.servingPool(name, version);
    const input = await servingInputFrom(req, limits);
    const begun = await startAnswer(
      res,
      errors,
      (options) => server.models.submit(name, version, input, options),
      mayStream(server, name, version),
    );
    if (begun.stream) {
      status = begun.stream.head.status;
      await sendStream(res, begun.stream);
    } else {
      const after = budget?.turn();
      if (after) await after;
      const answer = servingAnswer(
        begun.output,
        req.headers.accept || undefined,
        input.contentType,
      );
      // Most answers carry no headers of their own: no empty object and entry list per request.
      if (answer.headers) {
        for (const [header, value] of Object.entries(answer.headers)) res.setHeader(header, value);
      }
      status = answer.status;
      send(res, status, answer.contentType, answer.body);
    }
  } catch (error) {
    const answer = errorAnswer(error, req, path, errors, log);
    status = answer.status;
    code = answer.code;
    for (const [header, value] of Object.entries(answer.headers)) res.setHeader(header, value);
    const body = errorBody(answer.status, answer.message, answer.type, 'djl');
    send(res, status, 'application/json', Buffer.from(JSON.stringify(body)));
  }
  const route = version === undefined ? ROUTE : VERSIONED_ROUTE;
  recordRequest(metrics, { api: 'inference', route, model: name, status, start }, isRegistered);
  if (server.config.accessLog) {
    logAccess(log, req, {
      api: 'inference',
      path,
      status,
      start,
      model: name,
      code,
      remote: req.socket.remoteAddress,
    });
  }
}

/** Writes a streamed answer's chunks as they come; resolves once it has ended either way. */
async function sendStream(res: http.ServerResponse, stream: ChunkedAnswer): Promise<void> {
  if (res.headersSent || res.destroyed) {
    stream.destroy();
    return;
  }
  res.statusCode = stream.head.status;
  for (const [header, value] of Object.entries(stream.headers)) res.setHeader(header, value);
  // The client gone, nothing more is read: the model's stream is cancelled meanwhile.
  res.once('close', () => stream.destroy());
  stream.pipe(res);
  await finished(res).catch(() => undefined);
}

/**
 * Writes a whole answer at once, its content type spelled as Koa spells it (charset added);
 * none when `type` is undefined.
 */
function send(
  res: http.ServerResponse,
  status: number,
  type: string | undefined,
  body: Buffer,
): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = status;
  if (status === 204) {
    res.end();
    return;
  }
  const contentType = type === undefined ? undefined : fullContentType(type);
  if (contentType) res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', body.byteLength);
  res.end(body);
}
