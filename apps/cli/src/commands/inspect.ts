import type { Command } from 'commander';
import type { CliContext } from '../cli-context.js';
import { collect, parseOverrides } from './repeatable-options.js';

interface InspectOptions {
  load: boolean;
  option: string[];
}

export function registerInspect(program: Command, cli: CliContext): void {
  program
    .command('inspect')
    .description(
      'show a model: engine, inputs and outputs, files, serving.properties in force, and what the engine reports',
    )
    .argument(
      '<model>',
      'model URL or path: [name[:version[:engine[:device]]]]=url, a folder, a model file or an archive',
    )
    .option('--no-load', 'read the files and serving.properties only; load no engine')
    .option(
      '--option <key=value>',
      'serving.properties override, e.g. option.optLevel=basic (repeatable)',
      collect,
      [],
    )
    .addHelpText(
      'after',
      `
Examples:
  kiln inspect ./models/resnet18
  kiln inspect resnet::OnnxRuntime=file:///models/resnet18.zip
  kiln inspect ./models/bert --no-load
  kiln inspect ./models/mlp --json | jq .loaded.inputs`,
    )
    .action(async (model: string, options: InspectOptions) => {
      const overrides = parseOverrides(options.option);
      const [{ loadEngineCatalog }, { formatModelReport }, { buildModelReport }] =
        await Promise.all([
          import('@kiln/server'),
          import('../inspect/format-report.js'),
          import('../inspect/model-report.js'),
        ]);
      const engines = await loadEngineCatalog();
      const report = await buildModelReport(model, engines, {
        overrides,
        load: options.load,
        warn: (line) => cli.err(`${cli.color.yellow('warning')}: ${line}`),
      });
      cli.out(cli.json ? JSON.stringify(report, null, 2) : formatModelReport(report, cli.color));
    });
}
