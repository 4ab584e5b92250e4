import fs from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Koa from 'koa';
import Router from '@koa/router';
import { pino, type Logger } from 'pino';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { type ServerConfig, isLoopbackHost, parseAddress } from './config/server-config.js';
import { accessLog } from './http/access-log.js';
import type { GrpcListener } from './grpc/grpc-listener.js';
import type { IngressPeer } from './cluster/ingress-peer.js';
import { applyManagementOp } from './cluster/management-ops.js';
import { errorMiddleware } from './http/error-middleware.js';
import { fastPredictions } from './http/fast-predictions.js';
import { inferenceOpenApi, managementOpenApi } from './http/openapi.js';
import { requestMetrics } from './http/request-metrics.js';
import { TurnBudget, turnBudgetMiddleware } from './http/turn-budget.js';
import { ServerMetrics } from './metrics/server-metrics.js';
import {
  DEFAULT_ENGINE_MODULES,
  enginePackageOf,
  loadEngineCatalog,
} from './models/engine-catalog.js';
import type { ModelEntry } from './models/model-entry.js';
import { ModelManager } from './models/model-manager.js';
import { sampleGauges } from './models/pool-metrics.js';
import { generationRoutes } from './generation/generation-routes.js';
import { inferenceRoutes } from './routes/inference-routes.js';
import { managementRoutes } from './routes/management-routes.js';
import type { ServerContext } from './routes/server-context.js';
import { v2Routes } from './routes/v2-routes.js';
import { type HostPolicy, checkHostAndOrigin, hostPolicy } from './security/host-origin.js';
import { createGuardedServer } from './security/listener-guard.js';
import { type ManagementKey, resolveManagementKey } from './security/management-key.js';
import { requireToken } from './security/token-auth.js';
import { SERVER_VERSION } from './version.js';

export interface StartServerOptions {
  readonly config: ServerConfig;
  /** Model URLs from the operator (command line): trusted, so not checked against allowed_urls. */
  readonly models?: readonly string[];
  /** Engine packages to serve with (default: every Kiln engine that is installed). */
  readonly engineModules?: readonly string[];
  readonly logger?: Logger;
  /**
   * Set in each ingress process of `ingress_processes`: management calls are applied in every
   * process through the primary, and /metrics sums every process's metrics.
   */
  readonly ingress?: IngressPeer;
}

export interface ListenerInfo {
  readonly inference: string;
  readonly management: string;
  readonly metrics: string;
  /** `host:port` of the v2 gRPC listener, when `grpc_address` is set. */
  readonly grpc?: string;
}

/** A running Kiln server: three HTTP listeners (and gRPC when configured) over one model manager. */
export interface KilnServer {
  readonly urls: ListenerInfo;
  readonly models: ModelManager;
  readonly log: Logger;
  /** The management API's key; undefined when token authorization is disabled. */
  readonly managementKey: ManagementKey | undefined;
  /** Stops accepting predictions, answers the accepted ones (drain), then closes. */
  stop(): Promise<void>;
}

export async function startKilnServer(options: StartServerOptions): Promise<KilnServer> {
  const { config } = options;
  const log = options.logger ?? pino({ name: 'kiln' });
  checkListenerSecurity(config);

  const engines = await loadEngineCatalog(options.engineModules ?? DEFAULT_ENGINE_MODULES);
  const metrics = new ServerMetrics();
  const models = new ModelManager(config, engines, metrics, log);
  const managementKey = config.disableTokenAuthorization
    ? undefined
    : resolveManagementKey(config.managementToken, config.keyFile);
  const { ingress } = options;
  const server: ServerContext = {
    config,
    models,
    metrics,
    log,
    version: SERVER_VERSION,
    accepting: true,
    startupRegistered: false,
    manage: ingress ? (op) => ingress.manage(op) : (op) => applyManagementOp(models, op),
  };
  const errorOptions = { overloadStatus: config.overloadStatus, retryAfterS: config.retryAfterS };

  const inference = new Koa();
  // Logging and metrics sit outside the error handler so that they see the final status.
  if (config.accessLog) inference.use(accessLog(log, 'inference'));
  const known = (name: string) => models.has(name);
  inference.use(requestMetrics(metrics, 'inference', known));
  inference.use(errorMiddleware(errorOptions, log));
  inference.use(hostGuard(config.inferenceAddress, config));
  const turnBudget =
    config.eventLoopTurnBudgetMs > 0 ? new TurnBudget(config.eventLoopTurnBudgetMs) : undefined;
  if (turnBudget) inference.use(turnBudgetMiddleware(turnBudget, isHealthCheck));
  const inferenceMeta = new Router();
  inferenceMeta.get('/openapi.json', (ctx) => (ctx.body = inferenceOpenApi(SERVER_VERSION)));
  for (const router of [
    inferenceMeta,
    generationRoutes(server),
    inferenceRoutes(server),
    v2Routes(server),
  ])
    inference.use(router.routes()).use(router.allowedMethods());

  const management = new Koa();
  // Logging and metrics sit outside the error handler so that they see the final status.
  if (config.accessLog) management.use(accessLog(log, 'management'));
  management.use(requestMetrics(metrics, 'management', known));
  management.use(errorMiddleware(errorOptions, log));
  management.use(hostGuard(config.managementAddress, config));
  if (managementKey) management.use(requireToken(managementKey.token));
  const managementMeta = new Router();
  managementMeta.get('/openapi.json', (ctx) => (ctx.body = managementOpenApi(SERVER_VERSION)));
  for (const router of [managementMeta, managementRoutes(server)])
    management.use(router.routes()).use(router.allowedMethods());

  const metricsApp = new Koa();
  metricsApp.use(errorMiddleware(errorOptions, log));
  metricsApp.use(hostGuard(config.metricsAddress, config));
  const metricsRouter = new Router();
  const samplePools = () =>
    sampleGauges(
      metrics,
      models
        .list()
        .flatMap((e) => (e.pool ? [[e.name, e.pool] as [string, NonNullable<typeof e.pool>]] : [])),
    );
  ingress?.attach({
    models,
    metricsJson: () => {
      samplePools();
      return metrics.registry.getMetricsAsJSON();
    },
  });
  metricsRouter.get('/metrics', async (ctx) => {
    if (ingress) {
      const { contentType, body } = await ingress.metricsText();
      ctx.type = contentType;
      ctx.body = body;
      return;
    }
    samplePools();
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  });
  metricsApp.use(metricsRouter.routes()).use(metricsRouter.allowedMethods());

  // Errors reach the client through errorMiddleware; what Koa still sees (sockets closed
  // mid-write) belongs in the log, not on stderr.
  for (const app of [inference, management, metricsApp]) {
    app.silent = true;
    app.on('error', (error: unknown) => log.debug({ err: error }, 'connection error'));
  }

  const listeners: http.Server[] = [];
  const inferenceHandler = fastPredictions(
    {
      server,
      hosts: listenerHosts(config.inferenceAddress, config),
      errors: errorOptions,
      budget: turnBudget,
    },
    inference.callback(),
  );
  const listen = async (app: Koa, address: string): Promise<string> => {
    const { host, port } = parseAddress(address);
    const handler = app === inference ? inferenceHandler : app.callback();
    const httpServer = createGuardedServer(handler, {
      maxConnections: config.maxConnections,
      headersTimeoutMs: Math.min(config.clientHeaderTimeoutMs, config.requestTimeoutMs),
      requestTimeoutMs: config.requestTimeoutMs,
      maxBodyBytes: config.maxRequestSize,
    });
    await new Promise<void>((resolve, reject) => {
      httpServer.once('error', reject);
      httpServer.listen(port, host, () => resolve());
    });
    listeners.push(httpServer);
    const bound = httpServer.address() as AddressInfo;
    return `http://${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}`;
  };

  // Registered one after another (loading still runs in the background), so that the first
  // version given for a name is its default, whatever order the inspections finish in.
  const startup = [...startupModels(config), ...(options.models ?? [])];
  const registerStartupModels = async () => {
    for (const url of startup) {
      try {
        const entry = await models.register({ url });
        void entry.loading.then(() =>
          entry.state === 'READY'
            ? log.info(
                {
                  model: entry.name,
                  version: entry.version,
                  ms: Math.round(entry.loadTimeMs ?? 0),
                  ...placementOf(entry),
                },
                'model ready',
              )
            : log.error({ model: entry.name, error: entry.error }, 'model failed to load'),
        );
      } catch (error) {
        log.error(
          { url, error: error instanceof Error ? error.message : String(error) },
          'model not registered',
        );
      }
    }
    server.startupRegistered = true;
  };
  if (ingress) {
    // An ingress process listens once it serves what the others serve; all but the first also
    // wait for their models to load, the first serving meanwhile.
    await registerStartupModels();
    const { othersServe } = await ingress.ready();
    if (othersServe) await Promise.all(models.list().map((entry) => entry.loading));
  }

  let urls: ListenerInfo;
  let grpc: GrpcListener | undefined;
  try {
    urls = {
      inference: await listen(inference, config.inferenceAddress),
      management: await listen(management, config.managementAddress),
      metrics: await listen(metricsApp, config.metricsAddress),
    };
    if (config.grpcAddress) {
      // gRPC's libraries load only for a server that listens for it.
      const { listenGrpc } = await import('./grpc/grpc-listener.js');
      grpc = await listenGrpc(server, config.grpcAddress);
      urls = { ...urls, grpc: grpc.address };
    }
  } catch (error) {
    await Promise.all(listeners.map((l) => new Promise((resolve) => l.close(resolve))));
    throw KilnError.wrap(error, KilnErrorCode.InvalidConfig, 'cannot listen');
  }
  log.info(
    {
      ...urls,
      engines: engines.modules.map(enginePackageOf),
      missingEngines: Object.keys(engines.missing).map(enginePackageOf),
    },
    'listening',
  );
  ingress?.listening(urls);
  if (managementKey?.keyFile)
    log.info({ keyFile: managementKey.keyFile }, 'management key written');
  else if (!managementKey) log.warn('management API token authorization is disabled');

  if (!ingress) void registerStartupModels();

  let stopping: Promise<void> | undefined;
  return {
    urls,
    models,
    log,
    managementKey,
    stop: () =>
      (stopping ??= (async () => {
        server.accepting = false;
        await models.shutdown(config.shutdownTimeoutMs);
        metrics.close();
        await Promise.all([
          grpc?.close(config.shutdownTimeoutMs),
          ...listeners.map(
            (l) =>
              new Promise<void>((resolve) => {
                l.close(() => resolve());
                l.closeIdleConnections();
              }),
          ),
        ]);
      })()),
  };
}

/** ShellTorch's lesson: a management API reachable from the network must demand a token. */
function checkListenerSecurity(config: ServerConfig): void {
  const { host } = parseAddress(config.managementAddress);
  if (!isLoopbackHost(host) && config.disableTokenAuthorization) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `management_address ${config.managementAddress} is reachable beyond this machine: token authorization cannot be disabled there`,
    );
  }
}

/** Refuses requests whose Host or Origin is not this listener's (DNS rebinding, CSRF). */
function hostGuard(address: string, config: ServerConfig): Koa.Middleware {
  const policy = listenerHosts(address, config);
  return async (ctx, next) => {
    checkHostAndOrigin(policy, ctx.get('host') || undefined, ctx.get('origin') || undefined);
    await next();
  };
}

/** The hosts and origins a listener at `address` accepts. */
function listenerHosts(address: string, config: ServerConfig): HostPolicy {
  return hostPolicy(parseAddress(address).host, config.allowedHosts, config.allowedOrigins);
}

/** `load_models`: URLs, or `ALL` for every model folder and archive in the store. */
function startupModels(config: ServerConfig): string[] {
  if (config.loadModels.length === 1 && config.loadModels[0]!.toUpperCase() === 'ALL') {
    if (!config.modelStore)
      throw new KilnError(KilnErrorCode.InvalidConfig, 'load_models=ALL needs a model_store');
    return fs
      .readdirSync(config.modelStore, { withFileTypes: true })
      .filter(
        (d) =>
          !d.name.startsWith('.') && (d.isDirectory() || /\.(zip|tar|tar\.gz|tgz)$/.test(d.name)),
      )
      .map((d) => path.join(config.modelStore!, d.name));
  }
  return config.loadModels.map((url) =>
    config.modelStore && !/^[a-z]+:\/\//.test(url) && !url.includes('=') && !path.isAbsolute(url)
      ? path.join(config.modelStore, url)
      : url,
  );
}

/** Where a ready model's workers run, for its log line. */
function placementOf(entry: ModelEntry): { placement?: string; placementReason?: string } {
  const placement = entry.pool?.describe().placement;
  return placement ? { placement: placement.kind, placementReason: placement.reason } : {};
}

/** Liveness and readiness probes: answered at once, never behind a turn budget. */
const HEALTH_CHECK =
  /^\/(?:ping|v2\/health\/(?:live|ready)|v2\/models\/[^/]+(?:\/versions\/[^/]+)?\/ready)$/;

function isHealthCheck(path: string): boolean {
  return HEALTH_CHECK.test(path);
}
