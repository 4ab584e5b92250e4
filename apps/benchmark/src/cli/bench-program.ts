import { Command, CommanderError, Option } from 'commander';
import { BENCH_VERSION } from '../version.js';
import { EXIT_OK, EXIT_USAGE, describeBenchFailure } from './bench-errors.js';
import { type RawBenchFlags, planBench } from './bench-options.js';
import { type BenchIo, executePlan } from './run-plan.js';

const EXAMPLES = `
Examples:
  in process (djl-bench's flags):
    kiln-bench -u ./models/resnet18 -s 1,3,224,224 -c 200 -t 2
    kiln-bench -e OnnxRuntime -u bert=./models/bert -s "(1,128)l,(1,128)l" -d 30s -t 0
  against a running server (Kiln or any v2-protocol server):
    kiln-bench --server http://127.0.0.1:8080 -n resnet18 --protocol v2-binary \\
      --concurrency 1:64:x2 --metrics http://127.0.0.1:8082/metrics --html report.html
    kiln-bench --server http://127.0.0.1:8080 -n iris -i request.json --rate 50:400:x2
  find a serving configuration for a P99 budget:
    kiln-bench -u ./models/resnet18 -s 1,3,224,224 --tune --latency-budget 100

Shapes: 1,3,224,224 is one float32 input; (1,3,224,224)f,(1,128)l gives each input a dtype
(f float32, d float64, s float16, u uint8, b int8, i int32, l int64, B bool).
Exit codes: 0 ok, 1 failure, 2 usage.`;

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

export interface RunBenchOptions extends Partial<BenchIo> {
  /** The command's name in help and messages (`kiln bench` when run through the kiln CLI). */
  readonly name?: string;
}

/** The kiln-bench command line; resolves to its exit code. */
export async function runBench(argv: readonly string[], io: RunBenchOptions = {}): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const verbose = argv.includes('--verbose');
  let flags: RawBenchFlags | undefined;
  const name = io.name ?? 'kiln-bench';
  const program = new Command(name)
    .description(
      'Benchmark a model in this process (djl-bench style), a running server over HTTP, or tune a serving configuration.',
    )
    .version(BENCH_VERSION)
    .helpOption('-h, --help', 'show this help')
    .option(
      '-u, --model-url <url>',
      'model to run in this process: [name[:version[:engine[:device]]]]=url or a path',
    )
    .option('-e, --engine <name>', 'engine to run it with (OnnxRuntime, PyTorch, TensorFlow…)')
    .option(
      '-s, --input-shapes <shapes>',
      "input shapes, e.g. 1,3,224,224 or (1,3,224,224)f,(1,128)l; default: the model's own",
    )
    .option('-i, --input <file>', 'send this file as the request body instead of synthetic tensors')
    .option('--content-type <type>', 'media type of --input (default: from its extension)')
    .option('-c, --iteration <n>', 'measured requests (in process)', '100')
    .option(
      '-d, --duration <time>',
      'measure for this long instead of -c (30s, 2m, 1h; a bare number is minutes)',
    )
    .option(
      '-t, --threads <n>',
      'workers, each with its own copy of the model (≤ 0: one per core)',
      '1',
    )
    .option('-w, --warmup <n>', 'warm-up requests before measuring', '10')
    .option(
      '--concurrency <n|sweep>',
      'requests kept in flight: a number in process (default workers × batch), a sweep like 1:64:x2 against a server',
    )
    .option('--batch-size <n>', 'batch_size of the pool (in process)', '1')
    .option('--max-batch-delay <ms>', 'max_batch_delay of the pool, ms (in process)', '0')
    .option(
      '--intra-op-threads <n>',
      'intra-op threads per worker (default: the cores divided among the workers)',
    )
    .option(
      '--option <key=value>',
      'serving.properties override, e.g. option.optLevel=all (repeatable)',
      collect,
      [],
    )
    .option('--server <url>', 'measure a running server at this inference address instead')
    .option('-n, --model-name <name>', "the model's name on the server")
    .option('--model-version <version>', 'the model version on the server')
    .addOption(
      new Option('--protocol <protocol>', 'how to send requests')
        .choices(['predictions', 'v2', 'v2-binary'])
        .default('predictions'),
    )
    .option(
      '--rate <sweep>',
      'open-loop request rates per second instead of concurrency, e.g. 50:800:x2',
    )
    .option(
      '--input-names <names>',
      'input names, comma-separated, when the server does not describe them',
    )
    .option(
      '--metrics <url>',
      "the server's Prometheus endpoint, for its own split of the time (Kiln: http://127.0.0.1:8082/metrics)",
    )
    .option('--window <time>', 'measurement window of a level (ms, or with a unit)', '1000')
    .option(
      '--max-windows <n>',
      'windows before a level that does not settle is reported as unstable',
      '10',
    )
    .option('--timeout <time>', 'per-request limit (ms, or with a unit)', '30000')
    .option(
      '--tune',
      'sweep batch_size, max_batch_delay and workers×threads and recommend serving.properties',
    )
    .option('--latency-budget <ms>', 'P99 latency the --tune recommendation must stay within')
    .option('--batch-sizes <list>', 'batch sizes --tune tries (default 1,2,4,8)')
    .option('--delays <list>', 'max_batch_delay values (ms) --tune tries (default 2,10,50)')
    .option('--workers <list>', 'worker counts --tune tries (default 1,2,4… up to the cores)')
    .option('--save <file>', 'write the serving.properties --tune recommends to a file')
    .option(
      '--save-config <file>',
      'write the config.properties lines (server-wide keys) --tune recommends to a file',
    )
    .option(
      '--json [file]',
      'write the result as JSON to a file, or to stdout instead of the table',
    )
    .option('--csv <file>', 'write the result as CSV')
    .option('--html <file>', 'write an HTML report with charts (opens offline)')
    .option('--verbose', 'print stack traces')
    .addHelpText('after', EXAMPLES.replaceAll('kiln-bench', name))
    .showHelpAfterError(`(run ${name} --help for usage)`)
    .allowExcessArguments(false)
    .exitOverride()
    .configureOutput({ writeOut: (s) => stdout.write(s), writeErr: (s) => stderr.write(s) })
    .action((options: RawBenchFlags) => {
      flags = options;
    });
  try {
    await program.parseAsync(argv, { from: 'user' });
    if (!flags) return EXIT_OK;
    const plan = planBench(flags);
    await executePlan(plan, { stdout, stderr });
    return EXIT_OK;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    const failure = describeBenchFailure(error, verbose);
    for (const line of failure.lines) stderr.write(`${line}\n`);
    return failure.exitCode;
  }
}
