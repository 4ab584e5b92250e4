import path from 'node:path';
import type { Command } from 'commander';
import type { ModelEntry, ModelManager } from '@kiln/server';
import type { CliContext } from '../cli-context.js';
import { UsageError } from '../cli-errors.js';
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
    .addHelpText(
      'after',
      `
Examples:
  kiln serve --demo
  kiln serve -m resnet::OnnxRuntime=file:///models/resnet18 -m mlp=./models/mlp.zip
  kiln serve -s ./model-store -f config.properties
  kiln serve --model_dir /mnt/models --model_name resnet --grpc-address 0.0.0.0:8081
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
      // Loaded here rather than at the top, so that the other commands do not pay for them.
      const [{ pino }, { loadServerConfig, startKilnServer }] = await Promise.all([
        import('pino'),
        import('@kiln/server'),
      ]);
      const config = loadServerConfig({
        ...(options.configFile ? { file: options.configFile } : {}),
        overrides: {
          model_store: options.modelStore,
          inference_address: options.inferenceAddress,
          management_address: options.managementAddress,
          metrics_address: options.metricsAddress,
          grpc_address: options.grpcAddress,
        },
      });
      // stdout carries the JSON log lines (access log included) and nothing else, so that it
      // stays machine-readable; what people read goes to stderr.
      const logger = pino({ name: 'kiln', level: cli.verbose ? 'debug' : 'info' });
      const server = await startKilnServer({ config, models, logger });
      cli.err(`${cli.color.bold('Kiln')} is serving`);
      cli.err(`  inference   ${server.urls.inference}`);
      cli.err(`  management  ${server.urls.management}`);
      cli.err(`  metrics     ${server.urls.metrics}/metrics`);
      if (server.urls.grpc) cli.err(`  grpc        ${server.urls.grpc}`);
      const key = server.managementKey;
      if (key?.keyFile) {
        cli.err(`  management key ${key.token} (in ${key.keyFile})`);
        cli.err(
          `    curl -H "Authorization: Bearer ${key.token}" ${server.urls.management}/models`,
        );
      } else if (!key) {
        cli.err(
          `  management key ${cli.color.yellow('disabled')} (disable_token_authorization=true)`,
        );
      }
      reportModels(cli, server.models);
      const stop = async (signal: string) => {
        cli.err(`${signal}: draining in-flight requests…`);
        await server.stop();
        cli.err('stopped');
        process.exit(0);
      };
      process.once('SIGTERM', () => void stop('SIGTERM'));
      process.once('SIGINT', () => void stop('SIGINT'));
    });
}

/** Prints each model's state as it is registered and once its loading settles. */
function reportModels(cli: CliContext, models: ModelManager): void {
  const report = (entry: ModelEntry) => {
    cli.err(
      `  model ${entry.name}${entry.version ? `:${entry.version}` : ''} ${cli.color.yellow('PENDING')} (${entry.url})`,
    );
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
