import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { readBody } from '../http/read-body.js';
import type { ModelEntry } from '../models/model-entry.js';
import { findStoreModel, storeModels } from '../models/model-store.js';
import { redactPaths } from '../security/redact-paths.js';
import { type ClientModelSettings, registerClientModel } from './client-registration.js';
import { type ServerContext, bodyLimits } from './server-context.js';

/** One row of `POST /v2/repository/index`, as Triton answers it. */
export interface RepositoryIndexEntry {
  name: string;
  /** '' for a model registered without a version, or one the store holds but nobody loaded. */
  version: string;
  /** READY, LOADING, UNLOADING, or UNAVAILABLE (failed, or in the store and not loaded). */
  state: string;
  reason: string;
}

/** What a model's state reads as in Triton's repository index. */
const STATES: Record<ModelEntry['state'], string> = {
  PENDING: 'LOADING',
  READY: 'READY',
  FAILED: 'UNAVAILABLE',
  UNLOADING: 'UNLOADING',
};

/** Load parameters, as the management API's query parameters name them. */
const INTEGER_PARAMETERS = {
  batch_size: ['batchSize', 1],
  max_batch_delay: ['maxBatchDelayMs', 0],
  min_worker: ['minWorkers', 0],
  max_worker: ['maxWorkers', 0],
  job_queue_size: ['jobQueueSize', 1],
} as const;

/**
 * The v2 protocol's model repository extension, as Triton serves it: the index of the models
 * served and those the model store holds, and load / unload by name. Loading takes a model
 * from the model store only, through the management API's registration (and its allowlist);
 * `access` guards every route (see repositoryAccess).
 */
export function v2RepositoryRoutes(server: ServerContext, access: Middleware): Router {
  const router = new Router({ prefix: '/v2/repository' });
  router.use(async (ctx, next) => {
    ctx.state.errorStyle = 'v2';
    await next();
  });
  router.use(access);

  router.post('/index', async (ctx) => {
    const body = await jsonBody(ctx, server);
    if (body.ready !== undefined && typeof body.ready !== 'boolean')
      throw new KilnError(KilnErrorCode.InvalidInput, '"ready" must be true or false');
    const index = repositoryIndex(server);
    ctx.body = body.ready ? index.filter((m) => m.state === 'READY') : index;
  });

  router.post('/models/:model/load', async (ctx) => {
    const name = modelName(ctx);
    const settings = loadSettings(await jsonBody(ctx, server));
    const stored = findStoreModel(server.config.modelStore, name);
    if (!stored) {
      throw new KilnError(
        KilnErrorCode.ModelNotFound,
        server.config.modelStore
          ? `model ${name} is not in the model store`
          : `model ${name} cannot be loaded: this server has no model_store`,
      );
    }
    // Triton reloads a model that is loaded already: from the store's files as they are now.
    if (server.models.has(name))
      await server.manage({ kind: 'unregister', name, version: undefined });
    await registerClientModel(server, stored.entry, { ...settings, name }, true);
    ctx.state.model = name;
    ctx.body = { name, state: 'READY' };
  });

  router.post('/models/:model/unload', async (ctx) => {
    const name = modelName(ctx);
    await jsonBody(ctx, server);
    // Unknown models are answered 404 here rather than by the unregistration.
    server.models.versions(name);
    ctx.state.model = name;
    await server.manage({ kind: 'unregister', name, version: undefined });
    ctx.body = { name, state: 'UNAVAILABLE' };
  });
  return router;
}

/** Every version served, then every store model not served, by name. */
function repositoryIndex(server: ServerContext): RepositoryIndexEntry[] {
  const served = server.models.list().map((entry) => ({
    name: entry.name,
    version: entry.version,
    state: STATES[entry.state],
    reason: entry.state === 'FAILED' ? redactPaths(entry.error ?? 'failed to load') : '',
  }));
  const unserved = storeModels(server.config.modelStore)
    .filter((m) => !server.models.has(m.name))
    .map((m) => ({ name: m.name, version: '', state: 'UNAVAILABLE', reason: 'not loaded' }));
  return [...served, ...unserved].sort(
    (a, b) => a.name.localeCompare(b.name) || a.version.localeCompare(b.version),
  );
}

/** The route's model name, checked before it comes near the file system. */
function modelName(ctx: Context): string {
  const name = ctx.params.model!;
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(name)) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `model name ${JSON.stringify(name)} must be letters, digits, '_', '.' or '-'`,
    );
  }
  return name;
}

/** The request's JSON object; an empty body is `{}`. */
async function jsonBody(ctx: Context, server: ServerContext): Promise<Record<string, unknown>> {
  const bytes = await readBody(ctx.req, bodyLimits(server));
  if (bytes.length === 0) return {};
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new KilnError(KilnErrorCode.InvalidInput, 'request body is not valid JSON');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new KilnError(KilnErrorCode.InvalidInput, 'request body must be a JSON object');
  return body as Record<string, unknown>;
}

/** A load request's `parameters`, as registration settings. */
function loadSettings(body: Record<string, unknown>): ClientModelSettings {
  const parameters = body.parameters ?? {};
  if (parameters === null || typeof parameters !== 'object' || Array.isArray(parameters))
    throw new KilnError(KilnErrorCode.InvalidInput, '"parameters" must be a JSON object');
  const settings: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(parameters)) {
    if (key === 'config' || key.startsWith('file:')) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `load parameter ${key} is not supported: models load from the model store as they are (serving.properties configures them)`,
      );
    }
    if (key === 'engine') {
      if (typeof value !== 'string' || value === '')
        throw new KilnError(KilnErrorCode.InvalidInput, 'load parameter engine must be a name');
      settings.engine = value;
      continue;
    }
    const integer = INTEGER_PARAMETERS[key as keyof typeof INTEGER_PARAMETERS];
    if (!integer) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `unknown load parameter ${key}; known: engine, ${Object.keys(INTEGER_PARAMETERS).join(', ')}`,
      );
    }
    const [setting, min] = integer;
    const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
    if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < min) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `load parameter ${key}=${JSON.stringify(value)} must be an integer ≥ ${min}`,
      );
    }
    settings[setting] = number;
  }
  return settings as ClientModelSettings;
}
