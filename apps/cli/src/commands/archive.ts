import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { CliContext } from '../cli-context.js';
import { UsageError } from '../cli-errors.js';

interface ArchiveOptions {
  output: string;
  force?: boolean;
  level: string;
  load: boolean;
}

export function registerArchive(program: Command, cli: CliContext): void {
  program
    .command('archive')
    .description(
      'pack a model folder (model, serving.properties, translator plugin) into a .zip or .tar.gz, checked first',
    )
    .argument('<dir>', 'the model folder')
    .requiredOption(
      '-o, --output <file>',
      'the archive to write: model.zip, model.tar.gz (.tgz) or model.tar',
    )
    .option('--force', 'replace the output file if it exists')
    .option('--level <0-9>', 'compression level; 0 stores the files as they are', '6')
    .option(
      '--no-load',
      'check the files and engine only; do not load the model and its translator',
    )
    .addHelpText(
      'after',
      `
Before writing, the folder must hold only regular files (no symlinks), an installed engine
must recognise it, and the model must load with its translator. The archive is then read
back with Kiln's own extractor before it appears under its name.

Examples:
  kiln archive ./models/iris -o iris.zip
  kiln archive ./models/resnet18 -o resnet18.tar.gz --level 1
  kiln archive ./models/bert -o bert.zip --no-load    # engine not installed here`,
    )
    .action(async (dir: string, options: ArchiveOptions) => {
      const [{ NO_PROGRESS, formatBytes, terminalProgress }, { loadEngineCatalog }, packing] =
        await Promise.all([
          import('@kiln/benchmark'),
          import('@kiln/server'),
          import('../archive/pack-model.js'),
        ]);
      const { archiveFormatFor, assertOutsideFolder, packModel } = packing;
      const format = archiveFormatFor(options.output);
      if (!format)
        throw new UsageError(
          `cannot tell the archive format of ${options.output}`,
          'name it model.zip, model.tar.gz, model.tgz or model.tar',
        );
      const level = Number(options.level);
      if (!/^\d$/.test(options.level))
        throw new UsageError(`--level ${options.level} must be 0 to 9`);
      if (existsSync(options.output) && !options.force) {
        throw new UsageError(`${options.output} exists`, 'pass --force to replace it');
      }
      if (!existsSync(path.dirname(path.resolve(options.output)))) {
        throw new UsageError(
          `the folder of ${options.output} does not exist`,
          'create it first, or write the archive elsewhere',
        );
      }
      await assertOutsideFolder(dir, options.output);
      const engines = await loadEngineCatalog();
      const packed = await packModel(dir, options.output, {
        format,
        level,
        load: options.load,
        engines,
        progress: cli.json ? NO_PROGRESS : terminalProgress(),
      });
      if (cli.json) {
        cli.out(JSON.stringify(packed, null, 2));
        return;
      }
      cli.out(
        `${cli.color.green('packed')} ${packed.files} file${packed.files === 1 ? '' : 's'} (${formatBytes(packed.bytes)}) into ${packed.archive} (${formatBytes(packed.archiveBytes)})`,
      );
      cli.out(`  engine ${packed.engine}, translator ${packed.translator}`);
      cli.out(
        `  checked: ${packed.loaded ? 'model loads and its translator resolves, ' : ''}archive reads back as the folder`,
      );
      if (!packed.hasServingProperties) {
        cli.out(
          cli.color.yellow(
            '  no serving.properties: servers will pick the engine from the files and use default settings',
          ),
        );
      }
    });
}
