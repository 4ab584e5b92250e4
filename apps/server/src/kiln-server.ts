import fs from 'node:fs';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { type ServerConfig, isLoopbackHost, parseAddress } from './config/server-config.js';
import type { IngressPeer } from './cluster/ingress-peer.js';
import { withBoundPorts } from './cluster/bound-ports.js';
import { applyManagementOp } from './cluster/management-ops.js';
import type { Listeners } from './http/listeners.js';
import { ServerMetrics } from './metrics/server-metrics.js';
import {
  DEFAULT_ENGINE_MODULES,
  enginePackageOf,
  loadEngineCatalog,
} from './models/engine-catalog.js';
import type { ModelEntry } from './models/model-entry.js';
import { ModelManager } from './models/model-manager.js';
import { sampleGauges } from './models/pool-metrics.js';
import type { ServerContext } from './routes/server-context.js';
import { type ManagementKey, resolveManagementKey } from './security/management-key.js';
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
  /**
   * Stops accepting predictions, answers the accepted ones (drain), then closes; done within
   * shutdown_timeout whatever clients do, cutting what is still open then.
   */
  stop(): Promise<void>;
}

export async function startKilnServer(options: StartServerOptions): Promise<KilnServer> {
  const { ingress } = options;
  const config = ingress?.boundListeners
    ? withBoundPorts(options.config, ingress.boundListeners)
    : options.config;
  const log = options.logger ?? pino({ name: 'kiln' });
  checkListenerSecurity(config);

  const engines = await loadEngineCatalog(options.engineModules ?? DEFAULT_ENGINE_MODULES);
  // Node's process metrics start once the startup models are registered (below).
  const metrics = new ServerMetrics({ processMetrics: 'later' });
  const models = new ModelManager(config, engines, metrics, log);
  const managementKey = config.disableTokenAuthorization
    ? undefined
    : resolveManagementKey(config.managementToken, config.keyFile);
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

  const samplePools = () =>
    sampleGauges(
      metrics,
      models
        .list()
        .flatMap((e) => (e.pool ? [[e.name, e.pool] as [string, NonNullable<typeof e.pool>]] : [])),
    );
  // Management calls the primary replays into this process apply to these models.
  ingress?.attach({
    models,
    metricsJson: () => {
      samplePools();
      return metrics.registry.getMetricsAsJSON();
    },
  });

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
        const reason = error instanceof Error ? error.message : String(error);
        log.error({ url, error: reason }, 'model failed to load');
        // Kept, FAILED: the server must not report ready without a model it was told to serve.
        models.recordFailure(url, reason);
      }
    }
    server.startupRegistered = true;
  };
  // The startup models start loading before the HTTP side is imported, so that their threads
  // load them while it does; /ping answers 503 until every one of them is registered.
  const registering = registerStartupModels();
  await startupModelsLocated(registering, models);
  metrics.collectProcessMetrics();
  const listenersModule = import('./http/listeners.js');
  if (ingress) {
    // An ingress process listens once it serves what the others serve; all but the first also
    // wait for their models to load, the first serving meanwhile.
    await registering;
    const { othersServe } = await ingress.ready();
    if (othersServe) await Promise.all(models.list().map((entry) => entry.loading));
  }

  let listeners: Listeners;
  try {
    const { openListeners } = await listenersModule;
    listeners = await openListeners(server, { managementKey, ingress, samplePools });
  } catch (error) {
    // Nothing listens: the models that started loading must not keep the process alive.
    await registering;
    await models.shutdown(0);
    throw error;
  }
  const { urls } = listeners;
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

  let stopping: Promise<void> | undefined;
  return {
    urls,
    models,
    log,
    managementKey,
    stop: () =>
      (stopping ??= (async () => {
        const deadline = Date.now() + config.shutdownTimeoutMs;
        const left = () => Math.max(0, deadline - Date.now());
        server.accepting = false;
        // Keep-alive clients that go on sending get one refusal each, then a closed connection.
        // The HTTP requests accepted before are answered while their models still serve them.
        await beforeDeadline(listeners.drain(), deadline);
        const stopped = models
          .shutdown(left())
          .catch((error: unknown) => log.error({ err: error }, 'models did not stop cleanly'));
        if (!(await beforeDeadline(stopped, deadline)))
          log.warn('models still stopping at shutdown_timeout');
        metrics.close();
        // The pools cut what they still run at the deadline; their threads must be gone before
        // the process exits (a native runtime torn down mid-call can abort it).
        await Promise.all([listeners.close(left()), stopped]);
      })()),
  };
}

/** Whether `work` settled by `deadline` (a Date.now() time); it goes on either way. */
async function beforeDeadline(work: Promise<unknown>, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>(
    (resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()))),
  );
  const settled = await Promise.race([work.then(() => true), late]);
  clearTimeout(timer);
  return settled;
}

/**
 * The longest the listeners wait for the startup models to be located (a model downloaded or
 * unpacked takes longer, and goes on loading after they listen).
 */
const STARTUP_LOCATE_WAIT_MS = 1000;

/**
 * Waits until the startup models are located and their workers begin to load, or
 * STARTUP_LOCATE_WAIT_MS. Each step of locating a model waits for a turn of the event loop,
 * which the import of the HTTP side would hold for its whole length.
 */
async function startupModelsLocated(
  registering: Promise<void>,
  models: ModelManager,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<void>(
    (resolve) => (timer = setTimeout(resolve, STARTUP_LOCATE_WAIT_MS)),
  );
  const located = registering.then(() => Promise.all(models.list().map((entry) => entry.located)));
  await Promise.race([located, limit]);
  clearTimeout(timer);
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
