import Router from '@koa/router';
import type { Context } from 'koa';
import { KilnError, KilnErrorCode } from '@kiln/core';
import type { ModelDescription } from '../models/model-entry.js';
import { publicModelUrl, redactPathsDeep } from '../security/redact-paths.js';
import { registerClientModel } from './client-registration.js';
import type { ServerContext } from './server-context.js';

/** TorchServe / DJL Serving's management API. */
export function managementRoutes(server: ServerContext): Router {
  const router = new Router();

  router.post('/models', async (ctx) => {
    const url = requiredQuery(ctx, 'url');
    const synchronous = flag(ctx, 'synchronous', true);
    const { name } = await registerClientModel(
      server,
      url,
      {
        ...optional('name', text(ctx, 'model_name')),
        ...optional('version', text(ctx, 'model_version')),
        ...optional('engine', text(ctx, 'engine')),
        ...optional('batchSize', int(ctx, 'batch_size', 1)),
        ...optional('maxBatchDelayMs', int(ctx, 'max_batch_delay', 0)),
        ...optional('minWorkers', int(ctx, 'min_worker', 0)),
        ...optional('maxWorkers', int(ctx, 'max_worker', 0)),
        ...optional('jobQueueSize', int(ctx, 'job_queue_size', 1)),
      },
      synchronous,
    );
    ctx.status = synchronous ? 200 : 202;
    ctx.body = {
      status: synchronous
        ? `Model "${name}" registered.`
        : `Model "${name}" registration scheduled.`,
    };
  });

  const shown = (d: ModelDescription): ModelDescription =>
    redactPathsDeep({ ...d, modelUrl: publicModelUrl(d.modelUrl, server.config.modelStore) });

  router.get('/models', (ctx) => {
    const limit = int(ctx, 'limit', 1) ?? 100;
    const start = int(ctx, 'next_page_token', 0) ?? 0;
    const names = [...new Set(server.models.list().map((e) => e.name))].sort();
    const page = names.slice(start, start + limit);
    ctx.body = {
      models: page.map((name) => ({
        modelName: name,
        modelUrl: publicModelUrl(server.models.get(name).url, server.config.modelStore),
      })),
      ...(start + limit < names.length ? { nextPageToken: String(start + limit) } : {}),
    };
  });

  router.get('/models/:model', (ctx) => {
    ctx.body = server.models.describe(ctx.params.model!, text(ctx, 'version')).map(shown);
  });
  router.get('/models/:model/:version', (ctx) => {
    ctx.body = server.models.describe(ctx.params.model!, ctx.params.version!).map(shown);
  });

  const scale = async (ctx: Context) => {
    const synchronous = flag(ctx, 'synchronous', false);
    const limits = {
      ...optional('minWorkers', int(ctx, 'min_worker', 0)),
      ...optional('maxWorkers', int(ctx, 'max_worker', 0)),
    };
    await server.manage({
      kind: 'scale',
      name: ctx.params.model!,
      version: ctx.params.version,
      limits,
      synchronous,
    });
    ctx.status = synchronous ? 200 : 202;
    ctx.body = { status: synchronous ? 'Workers scaled.' : 'Processing worker updates...' };
  };
  router.put('/models/:model', scale);
  router.put('/models/:model/:version', scale);
  router.put('/models/:model/:version/set-default', async (ctx) => {
    await server.manage({
      kind: 'set-default',
      name: ctx.params.model!,
      version: ctx.params.version!,
    });
    ctx.body = { status: `Default version of "${ctx.params.model}" is now ${ctx.params.version}.` };
  });

  const unregister = async (ctx: Context) => {
    const { removed = 0 } = await server.manage({
      kind: 'unregister',
      name: ctx.params.model!,
      version: ctx.params.version,
    });
    ctx.body = {
      status: `Model "${ctx.params.model}" unregistered (${removed} version${removed === 1 ? '' : 's'}).`,
    };
  };
  router.delete('/models/:model', unregister);
  router.delete('/models/:model/:version', unregister);
  return router;
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

function text(ctx: Context, key: string): string | undefined {
  const value = ctx.query[key];
  if (Array.isArray(value))
    throw new KilnError(KilnErrorCode.InvalidInput, `query parameter ${key} given more than once`);
  return value === undefined || value === '' ? undefined : value;
}

function requiredQuery(ctx: Context, key: string): string {
  const value = text(ctx, key);
  if (value === undefined)
    throw new KilnError(KilnErrorCode.InvalidInput, `query parameter ${key} is required`);
  return value;
}

function int(ctx: Context, key: string, min: number): number | undefined {
  const value = text(ctx, key);
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < min) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `query parameter ${key}=${value} must be an integer ≥ ${min}`,
    );
  }
  return Number(value);
}

function flag(ctx: Context, key: string, fallback: boolean): boolean {
  const value = text(ctx, key);
  if (value === undefined) return fallback;
  if (value !== 'true' && value !== 'false')
    throw new KilnError(KilnErrorCode.InvalidInput, `query parameter ${key} must be true or false`);
  return value === 'true';
}
