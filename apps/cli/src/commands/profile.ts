import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { InputSpec } from '@kiln/benchmark';
import type * as OrtEngine from '@kiln/engine-onnxruntime';
import type { CliContext } from '../cli-context.js';
import { UsageError } from '../cli-errors.js';
import { collect, parseOverrides } from './repeatable-options.js';

interface ProfileOptions {
  model: string;
  inputShapes?: string;
  runs: string;
  warmup: string;
  top: string;
  chart?: string | false;
  option: string[];
}

export function registerProfile(program: Command, cli: CliContext): void {
  program
    .command('profile')
    .description(
      "time each layer of a model with its engine's profiler: per-layer table, bottlenecks and an SVG chart",
    )
    .requiredOption(
      '-m, --model <url>',
      'model URL or path: [name[:version[:engine[:device]]]]=url',
    )
    .option(
      '-s, --input-shapes <shapes>',
      "input shapes, e.g. 1,3,224,224 or (1,128)l,(1,128)l; default: the model's own",
    )
    .option('--runs <n>', 'runs counted in the profile', '20')
    .option('--warmup <n>', 'runs before those, left out (first runs allocate)', '3')
    .option('--top <n>', 'layers shown in the table and the chart', '15')
    .option('--chart <file>', 'where to write the SVG chart (default: <model>-profile.svg)')
    .option('--no-chart', 'write no chart')
    .option(
      '--option <key=value>',
      'serving.properties override, e.g. option.optLevel=basic (repeatable)',
      collect,
      [],
    )
    .addHelpText(
      'after',
      `
Per-layer timing needs ONNX Runtime's profiler: other engines answer "not supported".
Layer names are those after ONNX Runtime's graph optimizations (fused nodes show as one).

Examples:
  kiln profile -m ./models/resnet18 -s 1,3,224,224
  kiln profile -m ./models/bert -s "(1,128)l,(1,128)l" --runs 50 --chart bert.svg
  kiln profile -m ./models/mlp --option option.optLevel=basic --json > profile.json`,
    )
    .action(async (options: ProfileOptions) => {
      const runs = count('--runs', options.runs, 1);
      const warmup = count('--warmup', options.warmup, 0);
      const top = count('--top', options.top, 1);
      const [
        { NO_PROGRESS, parseShapes, terminalProgress },
        { importEnginePackage, loadEngineCatalog },
      ] = await Promise.all([import('@kiln/benchmark'), import('@kiln/server')]);
      const inputs = shapes(options.inputShapes, parseShapes);
      // Profiling is ONNX Runtime's: its engine package is an optional peer of the CLI.
      const { bottlenecks, formatProfile } = await importEnginePackage<typeof OrtEngine>(
        '@kiln/engine-onnxruntime',
      );
      const { profileLayers } = await import('../profile/layer-profile.js');
      const engines = await loadEngineCatalog();
      const result = await profileLayers(options.model, engines, {
        inputs,
        runs,
        warmup,
        overrides: parseOverrides(options.option),
        progress: cli.json ? NO_PROGRESS : terminalProgress(),
      });
      const chartFile =
        options.chart === false
          ? undefined
          : (options.chart ?? `${safeFileName(result.model)}-profile.svg`);
      if (chartFile) {
        const { layerChart } = await import('../profile/layer-chart.js');
        await writeFile(chartFile, layerChart(result, top));
      }
      if (cli.json) {
        cli.out(
          JSON.stringify(
            { ...result, bottlenecks: bottlenecks(result.profile), chart: chartFile },
            null,
            2,
          ),
        );
        return;
      }
      cli.out(
        cli.color.bold(
          `${result.model} on ${result.engine} ${result.engineVersion}, inputs ${result.inputs}`,
        ),
      );
      cli.out(formatProfile(result.profile, { limit: top }));
      if (chartFile) cli.out(`\nchart of time per layer: ${chartFile}`);
    });
}

function shapes(
  text: string | undefined,
  parseShapes: (text: string) => InputSpec[],
): InputSpec[] | undefined {
  if (text === undefined) return undefined;
  try {
    return parseShapes(text);
  } catch (error) {
    const hint = (error as { details?: { hint?: unknown } }).details?.hint;
    throw new UsageError((error as Error).message, typeof hint === 'string' ? hint : undefined);
  }
}

function count(flag: string, text: string, min: number): number {
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > 100_000)
    throw new UsageError(`${flag} ${text} must be a whole number from ${min} to 100000`);
  return value;
}

/** A model name as a file name: no separators or other characters shells dislike. */
function safeFileName(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]+/g, '_') || 'model';
}
