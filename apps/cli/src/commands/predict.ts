import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import {
  KilnError,
  KilnErrorCode,
  type ServingOutput,
  type TensorFormat,
  encodeJsonTensors,
  encodeTensors,
  inspectModelSource,
  settingWarningLines,
  settingsRefusal,
} from '@kiln/core';
import type { CliContext } from '../cli-context.js';
import { UsageError } from '../cli-errors.js';
import { collect, parseOverrides } from './repeatable-options.js';

interface PredictOptions {
  model: string;
  input: string;
  output?: string;
  contentType?: string;
  option: string[];
}

const OUTPUT_FORMATS: Record<string, TensorFormat> = {
  '.npz': 'npz',
  '.npy': 'npy',
  '.safetensors': 'safetensors',
  '.ndlist': 'ndlist',
  '.json': 'json',
};

export function registerPredict(program: Command, cli: CliContext): void {
  program
    .command('predict')
    .description('run one inference in this process and print the answer')
    .requiredOption('-m, --model <url>', 'model URL, [name[:version[:engine[:device]]]]=url')
    .requiredOption(
      '-i, --input <file>',
      'input file (npy, npz, safetensors, ndlist, JSON, JPEG, PNG) or - for stdin',
    )
    .option(
      '-o, --output <file>',
      'write output tensors to a file (.npz .npy .safetensors .ndlist .json)',
    )
    .option(
      '--content-type <type>',
      'input media type when detection is not enough (e.g. application/json)',
    )
    .option(
      '--option <key=value>',
      'serving.properties override, e.g. option.intraOpNumThreads=1 (repeatable)',
      collect,
      [],
    )
    .addHelpText(
      'after',
      `
Examples:
  kiln predict -m ./models/resnet18 -i input.npy
  kiln predict -m iris::OnnxRuntime=file://$HOME/.cache/kiln/demo/iris -i - <<< '[5.1, 3.5, 1.4, 0.2]'
  kiln predict -m ./models/squeezenet -i cat.jpg --json
  kiln predict -m ./models/mlp.zip -i batch.npz -o out.npz`,
    )
    .action(async (options: PredictOptions) => {
      const overrides = parseOverrides(options.option);
      const body = readInput(options.input);
      const [{ loadEngineCatalog }, { createWorkerPool }] = await Promise.all([
        import('@kiln/server'),
        import('@kiln/worker-pool'),
      ]);
      const engines = await loadEngineCatalog();
      // Keys that do nothing are named before the load; values Kiln cannot honour stop it.
      const inspection = await inspectModelSource(options.model, {
        registry: engines.registry,
        overrides,
      });
      const where = `serving.properties of ${inspection.name}`;
      for (const line of settingWarningLines(where, inspection.settings))
        cli.err(`${cli.color.yellow('warning')}: ${line}`);
      const refusal = settingsRefusal(inspection.name, inspection.settings);
      if (refusal) throw refusal;
      // One worker: the model runs off this thread, as it would in the server.
      const pool = await createWorkerPool({
        model: { url: options.model, engines: engines.modules, overrides },
        settings: { minWorkers: 1, maxWorkers: 1, maxBatchDelayMs: 0 },
      });
      try {
        const output = await pool.predict({
          body,
          ...(options.contentType ? { contentType: options.contentType } : {}),
        });
        writeOutput(cli, output, options.output);
      } finally {
        await pool.shutdown();
      }
    });
}

function readInput(input: string): Uint8Array {
  try {
    return input === '-' ? fs.readFileSync(0) : fs.readFileSync(input);
  } catch (error) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `cannot read input ${input}: ${(error as Error).message}`,
    );
  }
}

function writeOutput(cli: CliContext, output: ServingOutput, file: string | undefined): void {
  if (output.type === 'bytes') {
    if (file) fs.writeFileSync(file, output.body);
    else process.stdout.write(output.body);
    return;
  }
  // Answers stream only to a caller that takes their chunks, which this command is not.
  if (output.type === 'streamed') return;
  if (output.type === 'json') {
    if (file) fs.writeFileSync(file, JSON.stringify(output.value, null, 2));
    else cli.out(JSON.stringify(output.value, null, 2));
    return;
  }
  if (!file) {
    cli.out(JSON.stringify(encodeJsonTensors(output.tensors), null, cli.json ? 0 : 2));
    return;
  }
  const format = OUTPUT_FORMATS[path.extname(file).toLowerCase()];
  if (!format)
    throw new UsageError(
      `cannot tell the output format of ${file}`,
      `use one of ${Object.keys(OUTPUT_FORMATS).join(' ')}`,
    );
  fs.writeFileSync(file, encodeTensors(output.tensors, format).body);
  if (!cli.json) cli.out(`wrote ${output.tensors.length} tensor(s) to ${file}`);
}
