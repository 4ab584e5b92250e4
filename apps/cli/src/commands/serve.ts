import path from 'node:path';
import type { Command } from 'commander';
import type { Logger } from 'pino';
import type * as ServerExports from '@kiln/server';
import type {
  ListenerInfo,
  ManagementKey,
  ModelEntry,
  ModelManager,
  ServerConfig,
} from '@kiln/server';
import type { CliContext } from '../cli-context.js';
import { UsageError } from '../cli-errors.js';
import { startWithAllocator } from './allocator-reexec.js';
import { collect } from './repeatable-options.js';

interface ServeOptions {
  model: string[];
  modelStore?: string;
  configFile?: string;
  demo?: boolean;
  inferenceAddress?: string;
  managementAddress?: string;
  metricsAddress?: string;
  grpcAddress?: string;
  ingressProcesses?: string;
  model_dir?: string;
  model_name?: string;
}

export function registerServe(program: Command, cli: CliContext): void {
  program
    .command('serve')
    .description('start the Kiln server (inference, management and metrics listeners)')
    .option(
      '-m, --model <url>',
      'model URL to load, [name[:version[:engine[:device]]]]=url (repeatable)',
      collect,
      [],
    )
    .option(
      '-s, --model-store <dir>',
      'folder of models; management registrations are limited to it',
    )
    .option('-f, --config-file <file>', 'config.properties file')
    .option('--demo', 'serve the bundled Iris demo model (built on first use)')
    .option('--model_dir <dir>', "KServe's convention: serve the model folder (/mnt/models)")
    .option('--model_name <name>', 'name of the --model_dir model (default: from the folder)')
    .option('--inference-address <url>', 'e.g. http://127.0.0.1:8080')
    .option('--management-address <url>', 'e.g. http://127.0.0.1:8081')
    .option('--metrics-address <url>', 'e.g. http://127.0.0.1:8082')
    .option('--grpc-address <host:port>', 'v2 gRPC listener, e.g. 127.0.0.1:8085 (off by default)')
    .option(
      '--ingress-processes <n>',
      'server processes sharing the listeners, each serving every model (default 1)',
    )
    .addHelpText(
      'after',
      `
Examples:
  kiln serve --demo
  kiln serve -m resnet::OnnxRuntime=file:///models/resnet18 -m mlp=./models/mlp.zip
  kiln serve -s ./model-store -f config.properties
  kiln serve --model_dir /mnt/models --model_name resnet --grpc-address 0.0.0.0:8081
  kiln serve -m mlp=./models/mlp --ingress-processes 2
  KILN_INFERENCE_ADDRESS=http://0.0.0.0:8080 kiln serve -s ./model-store`,
    )
    .action(async (options: ServeOptions) => {
      const models = [...options.model];
      if (options.model_dir)
        models.push(
          options.model_name ? `${options.model_name}=${options.model_dir}` : options.model_dir,
        );
      else if (options.model_name) throw new UsageError('--model_name needs --model_dir');
      if (options.demo) models.push(`iris=${await ensureDemoModel(cli)}`);
      // A model's first thread starts now (or did, from the command's entry: main.ts), and
      // loads Node and Kiln's modules while this thread imports the server's.
      const pools = models.length > 0 ? await import('@kiln/worker-pool') : undefined;
      if (pools?.spareHostThreads() === 0) pools.prestartHostThread();
      // Loaded here rather than at the top, so that the other commands do not pay for them.
      const [{ pino }, server] = await Promise.all([import('pino'), import('@kiln/server')]);
      const ingress = server.IngressPeer.ofThisProcess();
      const configWarnings: string[] = [];
      const config = server.loadServerConfig({
        ...(options.configFile ? { file: options.configFile } : {}),
        onWarning: (warning) => configWarnings.push(warning),
        overrides: {
          management_token: ingress?.managementToken,
          model_store: options.modelStore,
          inference_address: options.inferenceAddress,
          management_address: options.managementAddress,
          metrics_address: options.metricsAddress,
          grpc_address: options.grpcAddress,
          ingress_processes: options.ingressProcesses,
        },
      });
      // jemalloc / tcmalloc (cpu_launcher_args) load only at a process's start: the server
      // then runs in a child started with the allocator, and this process waits on it.
      const launcher = config.cpuLauncher;
      const allocated = startWithAllocator(launcher.enabled ? launcher.allocator : 'default');
      if (allocated.kind === 'child') {
        pools?.endSpareHostThreads();
        return allocated.exited;
      }
      if (allocated.warning) cli.err(`${cli.color.yellow('warning')}: ${allocated.warning}`);
      // stdout carries the JSON log lines (access log included) and nothing else, so that it
      // stays machine-readable; what people read goes to stderr.
      const logger = pino({ name: 'kiln', level: cli.verbose ? 'debug' : 'info' });
      // Every ingress process reads the file again: the one that started them says it once.
      for (const warning of ingress ? [] : configWarnings) {
        cli.err(`${cli.color.yellow('warning')}: ${warning}`);
        logger.warn(warning);
      }
      if (config.ingressProcesses > 1 && !ingress) {
        // The ingress processes serve the models; this one only keeps them running.
        pools?.endSpareHostThreads();
        await servePrimary(cli, server, config, logger);
        return;
      }
      const kiln = await server.startKilnServer({
        config,
        models,
        logger: ingress ? logger.child({ ingress: ingress.index }) : logger,
        ...(ingress ? { ingress } : {}),
      });
      if (ingress) {
        // The primary prints the addresses; the first process reports the models.
        if (ingress.index === 0) reportModels(cli, kiln.models);
        const drain = () => {
          exitAtDeadline(cli, config.shutdownTimeoutMs + STOP_GRACE_MS);
          void kiln.stop().then(() => process.exit(0));
        };
        ingress.onStop(drain);
        // A signal to the whole group (Ctrl-C, systemd) reaches every process: each drains
        // what it accepted, and the primary waits for them; one signalled alone is replaced.
        process.once('SIGTERM', drain);
        process.once('SIGINT', drain);
        return;
      }
      printBanner(cli, kiln.urls, kiln.managementKey);
      reportModels(cli, kiln.models);
      drainOnSignals(cli, () => kiln.stop(), config.shutdownTimeoutMs + STOP_GRACE_MS);
    });
}

/**
 * How long past shutdown_timeout a server process may take to stop before it exits anyway
 * (the server cuts what is open at shutdown_timeout; this covers a stop that hangs after).
 */
const STOP_GRACE_MS = 1000;
/** The primary kills an ingress process still there after its own grace… */
const INGRESS_KILL_GRACE_MS = 1500;
/** …and exits itself at the latest this long past shutdown_timeout. */
const PRIMARY_STOP_GRACE_MS = 2500;

/** SIGTERM or Ctrl-C: answer what was accepted, then exit 0; exit 1 if not stopped by `limitMs`. */
function drainOnSignals(cli: CliContext, stop: () => Promise<void>, limitMs: number): void {
  const drain = async (signal: string) => {
    cli.err(`${signal}: draining in-flight requests…`);
    exitAtDeadline(cli, limitMs);
    await stop();
    cli.err('stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void drain('SIGTERM'));
  process.once('SIGINT', () => void drain('SIGINT'));
}

/** The backstop of a stop: whatever still runs after `limitMs`, the process exits (code 1). */
function exitAtDeadline(cli: CliContext, limitMs: number): void {
  setTimeout(() => {
    cli.err(`not stopped within shutdown_timeout: exiting`);
    process.exit(1);
  }, limitMs).unref();
}

type ServerModule = typeof ServerExports;

/**
 * `ingress_processes` > 1: this process starts the ingress processes (each runs this command
 * again as a server) and keeps them running; it serves nothing itself.
 */
async function servePrimary(
  cli: CliContext,
  server: ServerModule,
  config: ServerConfig,
  logger: Logger,
): Promise<void> {
  // One key for every process: each would otherwise generate its own.
  const key = config.disableTokenAuthorization
    ? undefined
    : server.resolveManagementKey(config.managementToken, config.keyFile);
  const primary = server.startIngressPrimary({
    processes: config.ingressProcesses,
    log: logger,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    stopGraceMs: INGRESS_KILL_GRACE_MS,
    ...(key ? { managementToken: key.token } : {}),
  });
  drainOnSignals(cli, () => primary.stop(), config.shutdownTimeoutMs + PRIMARY_STOP_GRACE_MS);
  const urls = await primary.listening;
  printBanner(cli, urls, key, config.ingressProcesses);
}

function printBanner(
  cli: CliContext,
  urls: ListenerInfo,
  key: ManagementKey | undefined,
  processes = 1,
): void {
  const lines = [
    `${cli.color.bold('Kiln')} is serving${processes > 1 ? ` (${processes} ingress processes)` : ''}`,
    `  inference   ${urls.inference}`,
    `  management  ${urls.management}`,
    `  metrics     ${urls.metrics}/metrics`,
  ];
  if (urls.grpc) lines.push(`  grpc        ${urls.grpc}`);
  if (key?.keyFile) {
    lines.push(`  management key ${key.token} (in ${key.keyFile})`);
    lines.push(`    curl -H "Authorization: Bearer ${key.token}" ${urls.management}/models`);
  } else if (!key) {
    lines.push(
      `  management key ${cli.color.yellow('disabled')} (disable_token_authorization=true)`,
    );
  }
  // One write: other processes' lines (model states) cannot land in the middle.
  cli.err(lines.join('\n'));
}

/** Prints each model's state as it is registered and once its loading settles. */
function reportModels(cli: CliContext, models: ModelManager): void {
  const report = (entry: ModelEntry) => {
    cli.err(
      `  model ${entry.name}${entry.version ? `:${entry.version}` : ''} ${cli.color.yellow('PENDING')} (${entry.url})`,
    );
    for (const warning of entry.settingWarnings ?? [])
      cli.err(`    ${cli.color.yellow('warning')}: ${warning}`);
    void entry.loading.then(() => {
      if (entry.state === 'READY') {
        const placement = entry.pool?.describe().placement;
        const where = placement ? ` (${placement.kind}: ${placement.reason})` : '';
        cli.err(
          `  model ${entry.name} ${cli.color.green('READY')} in ${Math.round(entry.loadTimeMs ?? 0)} ms${where}`,
        );
      } else {
        cli.err(
          `  model ${entry.name} ${cli.color.red('FAILED')}: ${entry.error ?? 'unknown error'}`,
        );
      }
    });
  };
  // Those registered while the server started, then every later one (no polling timer).
  for (const entry of models.list()) report(entry);
  models.onRegistered(report);
}

/** The Iris demo model, trained and written once per Kiln version into the user's cache. */
async function ensureDemoModel(cli: CliContext): Promise<string> {
  const { kilnHome } = await import('@kiln/core');
  const dir = path.join(kilnHome(), 'demo', 'iris');
  const { existsSync } = await import('node:fs');
  if (!existsSync(path.join(dir, 'model.onnx'))) {
    const { buildIrisDemo } = await import('@kiln/model-tools');
    const demo = await buildIrisDemo(dir);
    cli.err(
      `built the Iris demo model in ${dir} (holdout accuracy ${(demo.holdoutAccuracy * 100).toFixed(1)}%)`,
    );
  }
  return dir;
}
