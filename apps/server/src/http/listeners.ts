// The server's HTTP side: the inference, management and metrics apps, their listeners, and the
// gRPC listener when configured. kiln-server imports this module on start, while the startup
// models begin loading, so that Koa and the routes load beside the models' threads.
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import Router from '@koa/router';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { type ServerConfig, parseAddress } from '../config/server-config.js';
import type { GrpcListener } from '../grpc/grpc-listener.js';
import type { IngressPeer } from '../cluster/ingress-peer.js';
import { generationRoutes } from '../generation/generation-routes.js';
import type { ListenerInfo } from '../kiln-server.js';
import { inferenceRoutes } from '../routes/inference-routes.js';
import { managementRoutes } from '../routes/management-routes.js';
import type { ServerContext } from '../routes/server-context.js';
import { v2RepositoryRoutes } from '../routes/v2-repository-routes.js';
import { v2Routes } from '../routes/v2-routes.js';
import { type HostPolicy, checkHostAndOrigin, hostPolicy } from '../security/host-origin.js';
import { createGuardedServer } from '../security/listener-guard.js';
import type { ManagementKey } from '../security/management-key.js';
import { repositoryAccess } from '../security/repository-access.js';
import { requireToken } from '../security/token-auth.js';
import { SERVER_VERSION } from '../version.js';
import { accessLog } from './access-log.js';
import { ConnectionDrain, closeListener } from './connection-drain.js';
import { errorMiddleware } from './error-middleware.js';
import { fastPredictions } from './fast-predictions.js';
import { inferenceOpenApi, managementOpenApi } from './openapi.js';
import { requestMetrics } from './request-metrics.js';
import { TurnBudget, turnBudgetMiddleware } from './turn-budget.js';

export interface OpenListenersOptions {
  readonly managementKey: ManagementKey | undefined;
  /** Set in an ingress process: /metrics answers for every process. */
  readonly ingress: IngressPeer | undefined;
  /** Brings the pools' gauges up to date before /metrics answers. */
  readonly samplePools: () => void;
}

/** The server's listeners, bound. */
export interface Listeners {
  readonly urls: ListenerInfo;
  /**
   * From now on every HTTP answer closes its connection; idle connections close now. Resolves
   * once the HTTP requests accepted before are answered.
   */
  drain(): Promise<void>;
  /**
   * Closes every listener, each once its connections are closed; connections and gRPC calls
   * still open after `timeoutMs` are cut.
   */
  close(timeoutMs: number): Promise<void>;
}

/** Builds the three HTTP apps (and gRPC when configured) over `server` and listens. */
export async function openListeners(
  server: ServerContext,
  options: OpenListenersOptions,
): Promise<Listeners> {
  const { config, models, metrics, log } = server;
  const { managementKey, ingress, samplePools } = options;
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
  const repository = repositoryAccess(config.inferenceAddress, managementKey);
  for (const router of [
    inferenceMeta,
    generationRoutes(server),
    inferenceRoutes(server),
    v2Routes(server, { repository: repository !== undefined }),
    ...(repository ? [v2RepositoryRoutes(server, repository)] : []),
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
  const drain = new ConnectionDrain();
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
    const httpServer = createGuardedServer(
      handler,
      {
        maxConnections: config.maxConnections,
        headersTimeoutMs: Math.min(config.clientHeaderTimeoutMs, config.requestTimeoutMs),
        requestTimeoutMs: config.requestTimeoutMs,
        maxBodyBytes: config.maxRequestSize,
      },
      drain.ServerResponse,
    );
    await new Promise<void>((resolve, reject) => {
      httpServer.once('error', reject);
      httpServer.listen(port, host, () => resolve());
    });
    listeners.push(httpServer);
    drain.watch(httpServer);
    const bound = httpServer.address() as AddressInfo;
    return `http://${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}`;
  };
  const closeHttp = (timeoutMs: number) => {
    void drain.start();
    return Promise.all(listeners.map((l) => closeListener(l, timeoutMs)));
  };

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
      const { listenGrpc } = await import('../grpc/grpc-listener.js');
      grpc = await listenGrpc(server, config.grpcAddress);
      urls = { ...urls, grpc: grpc.address };
    }
  } catch (error) {
    await closeHttp(0);
    throw KilnError.wrap(error, KilnErrorCode.InvalidConfig, 'cannot listen');
  }
  return {
    urls,
    drain: () => drain.start(),
    close: async (timeoutMs) => {
      await Promise.all([grpc?.close(timeoutMs), closeHttp(timeoutMs)]);
    },
  };
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

/** Liveness and readiness probes: answered at once, never behind a turn budget. */
const HEALTH_CHECK =
  /^\/(?:ping|v2\/health\/(?:live|ready)|v2\/models\/[^/]+(?:\/versions\/[^/]+)?\/ready)$/;

function isHealthCheck(path: string): boolean {
  return HEALTH_CHECK.test(path);
}
