import Router from '@koa/router';
import type { Context } from 'koa';
import { KilnError, KilnErrorCode, V2_BINARY_HEADER } from '@kiln/core';
import type { ModelEntry } from '../models/model-entry.js';
import { readBody } from '../http/read-body.js';
import { answerUnlessGone, writeServingOutput } from '../http/serving-request.js';
import {
  MODEL_REPOSITORY_EXTENSION,
  V2_EXTENSIONS,
  modelMetadata,
  modelReady,
  serverReady,
} from './v2-metadata.js';
import { type ServerContext, bodyLimits } from './server-context.js';

/**
 * The Open Inference Protocol (KServe v2) as Triton serves it. `repository`: whether this
 * listener serves the model repository extension too (v2RepositoryRoutes), to advertise it.
 */
export function v2Routes(server: ServerContext, options: { repository: boolean }): Router {
  const router = new Router({ prefix: '/v2' });
  router.use(async (ctx, next) => {
    ctx.state.errorStyle = 'v2';
    await next();
  });

  router.get('/', (ctx) => {
    ctx.body = {
      name: 'kiln',
      version: server.version,
      extensions: options.repository
        ? [...V2_EXTENSIONS, MODEL_REPOSITORY_EXTENSION]
        : [...V2_EXTENSIONS],
    };
  });
  router.get('/health/live', (ctx) => {
    ctx.status = 200;
    ctx.body = { live: true };
  });
  router.get('/health/ready', (ctx) => {
    const ready = serverReady(server);
    ctx.status = ready ? 200 : 503;
    ctx.body = { ready };
  });

  const metadata = (ctx: Context) => {
    const described = modelMetadata(server, ctx.params.model!, ctx.params.version);
    ctx.state.model = described.name;
    ctx.body = described;
  };
  const ready = (ctx: Context) => {
    const entry = server.models.get(ctx.params.model!, ctx.params.version);
    const isReady = modelReady(server, entry.name, entry.version);
    ctx.status = isReady ? 200 : 503;
    ctx.body = { name: entry.name, ready: isReady };
  };
  const infer = async (ctx: Context) => {
    if (!server.accepting) throw new KilnError(KilnErrorCode.Closed, 'server is shutting down');
    const entry: ModelEntry = server.models.get(ctx.params.model!, ctx.params.version);
    ctx.state.model = entry.name;
    const headerLength = ctx.get(V2_BINARY_HEADER) || undefined;
    // Binary tensor data starts right after the JSON header: aligned there, it is not copied.
    const alignAt = Number(headerLength);
    const limits = bodyLimits(server);
    // A model that cannot take the request is refused before its body is read.
    server.models.servingPool(entry.name, ctx.params.version);
    const body = await readBody(
      ctx.req,
      limits,
      Number.isSafeInteger(alignAt) && alignAt >= 0 ? { alignAt } : {},
    );
    // Parsed, run and answered where the model runs: the body crosses to the worker once.
    const output = await answerUnlessGone(
      ctx.res,
      server.models.submit(entry.name, ctx.params.version, {
        body,
        v2: { headerLength, model: entry.name, version: entry.version },
        rawTensors: true,
        owned: true,
        maxDecodedBytes: limits.maxBytes,
      }),
    );
    if (output.type === 'tensors')
      throw new KilnError(KilnErrorCode.Internal, `model ${entry.name} gave no v2 reply`);
    writeServingOutput(ctx, output);
  };

  router.get('/models/:model', metadata);
  router.get('/models/:model/versions/:version', metadata);
  router.get('/models/:model/ready', ready);
  router.get('/models/:model/versions/:version/ready', ready);
  router.post('/models/:model/infer', infer);
  router.post('/models/:model/versions/:version/infer', infer);
  return router;
}
