import Router from '@koa/router';
import type { Context } from 'koa';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { generatesText, lmiPrediction } from '../generation/generation-routes.js';
import { pingStatus } from '../models/model-entry.js';
import { redactPaths } from '../security/redact-paths.js';
import { servingInputFrom, writeServingAnswer } from '../http/serving-request.js';
import { mayStream, startAnswer } from '../http/streamed-answer.js';
import { type ServerContext, bodyLimits } from './server-context.js';

/** DJL Serving's inference API: /ping, /predictions and SageMaker's /invocations. */
export function inferenceRoutes(server: ServerContext): Router {
  const router = new Router();

  router.get('/ping', (ctx) => {
    const statuses: Record<string, { status: string; error?: string }> = {};
    let code = 200;
    for (const entry of server.models.list()) {
      const status = pingStatus(entry);
      const key = entry.version ? `${entry.name}:${entry.version}` : entry.name;
      // Why a model failed is what its operator looks for first; server paths stay private.
      statuses[key] =
        status === 'FAILED' && entry.error
          ? { status, error: redactPaths(entry.error) }
          : { status };
      if (status === 'FAILED') code = 500;
      else if (status !== 'Healthy' && code === 200) code = 503;
    }
    if (!server.accepting) code = 503;
    ctx.status = code;
    ctx.body = statuses;
  });

  const predict = async (ctx: Context, name: string, version: string | undefined) => {
    ctx.state.model = name;
    if (!server.accepting) throw new KilnError(KilnErrorCode.Closed, 'server is shutting down');
    if (generatesText(server.models.get(name, version)))
      return lmiPrediction(ctx, server, name, version);
    // Refused before the body is read, as the fast route refuses (fast-predictions.ts).
    server.models.servingPool(name, version);
    const input = await servingInputFrom(ctx.req, bodyLimits(server));
    const start = await startAnswer(
      ctx.res,
      server.config,
      (options) => server.models.submit(name, version, input, options),
      mayStream(server, name, version),
    );
    writeServingAnswer(ctx, start, input.contentType);
  };

  router.post('/predictions/:model', (ctx) => predict(ctx, ctx.params.model!, undefined));
  router.post('/predictions/:model/:version', (ctx) =>
    predict(ctx, ctx.params.model!, ctx.params.version),
  );
  router.post('/invocations', (ctx) => {
    const named =
      typeof ctx.query.model_name === 'string'
        ? ctx.query.model_name
        : ctx.get('x-amzn-sagemaker-target-model') || undefined;
    if (named) return predict(ctx, named, undefined);
    const names = [...new Set(server.models.list().map((e) => e.name))];
    if (names.length !== 1) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `/invocations needs ?model_name= when the server has ${names.length} models`,
      );
    }
    return predict(ctx, names[0]!, undefined);
  });
  return router;
}
