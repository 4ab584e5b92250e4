import { type ChildProcessByStdio, execFile, spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { seededRandom } from '@kiln/testing';

const run = promisify(execFile);
const HERE = dirname(fileURLToPath(import.meta.url));
/** The Python with torch and torchvision: Debian's here; KILN_BENCH_PYTHON names another (a GPU machine's). */
export const PYTHON = process.env.KILN_BENCH_PYTHON || '/usr/bin/python3';
const BASELINE_BUILD = join(HERE, 'build');
const BASELINE = join(BASELINE_BUILD, 'kiln_libtorch_baseline');
const BIG = { maxBuffer: 64 * 1024 * 1024, timeout: 600_000 };

/** Environment of every measured process (set OMP_WAIT_POLICY here to compare like with like). */
export const childEnv: Record<string, string | undefined> = { ...process.env };

/** `python-frozen`: Python torch running the module frozen, as torch's docs advise. */
export type Contender = 'kiln' | 'cpp' | 'python' | 'python-frozen';

export interface LoopSpec {
  readonly modelDir: string;
  readonly threads: number;
  readonly batch: number;
  /** torch's device name, `cpu` (the default) or `cuda:N`. */
  readonly device?: string;
  /** Kiln: forwards kept going at once, one execution context each (default 1). */
  readonly inflight?: number;
  /** Python: `plain` (default) or `pinned-streams` copies (see python_loop.py). */
  readonly copies?: 'plain' | 'pinned-streams';
}

/**
 * A contender's process with its model loaded: it runs forwards when asked and stays idle in
 * between, so processes measured in turn never compete for the cores.
 */
export class Runner {
  private readonly lines: AsyncIterator<string>;

  private constructor(private readonly child: ChildProcessByStdio<Writable, Readable, null>) {
    this.lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  }

  static async start(
    contender: Contender,
    spec: LoopSpec,
    kilnOptions: readonly string[] = [],
  ): Promise<Runner> {
    const model = join(spec.modelDir, 'model.pt');
    const numbers = [String(spec.threads), String(spec.batch)];
    const device = spec.device ?? 'cpu';
    if (contender === 'cpp' && device !== 'cpu') throw new Error('the C++ loop runs on the CPU');
    const loopOptions = [
      ...(device === 'cpu' ? [] : [`device=${device}`]),
      ...(spec.inflight ? [`inflight=${spec.inflight}`] : []),
    ];
    const [file, args] =
      contender === 'cpp'
        ? [BASELINE, [model, ...numbers]]
        : contender === 'python' || contender === 'python-frozen'
          ? [
              PYTHON,
              [
                join(HERE, 'python_loop.py'),
                model,
                ...numbers,
                device,
                spec.copies ?? 'plain',
                contender === 'python-frozen' ? 'frozen' : 'as-loaded',
              ],
            ]
          : [
              process.execPath,
              [
                '--conditions=@kiln/source',
                '--import',
                'tsx',
                join(HERE, 'kiln-loop.ts'),
                spec.modelDir,
                ...numbers,
                ...loopOptions,
                ...kilnOptions,
              ],
            ];
    const child = spawn(file, args, {
      env: childEnv,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const runner = new Runner(child);
    const first = await runner.lines.next();
    if (first.done || first.value !== 'ready')
      throw new Error(`${contender} runner did not start (${String(first.value)})`);
    return runner;
  }

  /** Runs `count` forwards; their times in milliseconds. */
  async forwards(count: number): Promise<number[]> {
    this.child.stdin.write(`${count}\n`);
    const line = await this.lines.next();
    if (line.done) throw new Error('runner exited');
    return (JSON.parse(line.value) as { ms: number[] }).ms;
  }

  async close(): Promise<void> {
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.stdin.end('\n');
    await exited;
  }
}

export async function memory(
  modelDir: string,
  mode: 'shared' | 'separate',
  count: number,
  rounds: number,
) {
  const { stdout } = await run(
    process.execPath,
    [
      '--conditions=@kiln/source',
      '--import',
      'tsx',
      join(HERE, 'kiln-memory.ts'),
      modelDir,
      mode,
      String(count),
      String(rounds),
    ],
    { ...BIG, env: childEnv },
  );
  return JSON.parse(stdout.trim().split('\n').pop()!) as { rssMiB: number; peakMiB: number };
}

/** Writes torchvision's ResNet-18 or -50 (random weights) scripted to `file` with PYTHON's torch. */
export async function makeResnet(
  file: string,
  arch: 'resnet18' | 'resnet50' = 'resnet18',
): Promise<void> {
  await run(PYTHON, [join(HERE, 'make_resnet.py'), file, arch], BIG);
}

/** Builds the C++ baseline against the same LibTorch, unless it is newer than its source. */
export async function buildBaseline(): Promise<void> {
  if (
    existsSync(BASELINE) &&
    statSync(BASELINE).mtimeMs >= statSync(join(HERE, 'baseline.cc')).mtimeMs
  )
    return;
  await run(
    'cmake',
    ['-S', HERE, '-B', BASELINE_BUILD, '-G', 'Ninja', '-DCMAKE_BUILD_TYPE=Release'],
    BIG,
  );
  await run('cmake', ['--build', BASELINE_BUILD, '--parallel', '2'], BIG);
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * Runs the named runners in turns: per runner, the median forward time of each segment.
 * Ratios are then taken segment by segment, between measurements close in time.
 */
export async function turns(
  runners: Record<string, Runner>,
  count: number,
  forwards: number,
): Promise<Record<string, number[]>> {
  const names = Object.keys(runners);
  const medians: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (const name of names) await runners[name]!.forwards(3);
  // Each segment in its own shuffled order: a process leaves threads spinning or yielding on
  // the cores for a while after its turn (OpenMP teams, OpenBLAS), so a fixed rotation would
  // always hand one contender the same predecessor's leftovers.
  const random = seededRandom(0x6b696c6e);
  for (let s = 0; s < count; s++) {
    const order = [...names];
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (const name of order) medians[name]!.push(median(await runners[name]!.forwards(forwards)));
  }
  return medians;
}

/**
 * Each contender in a fresh process of its own, alone on the machine: `pairs` times, in
 * alternating order, one process is started, warmed up, timed over `forwards` forwards and
 * closed before the next starts. Per contender, the median forward time of each process.
 */
export async function alone(
  specs: Record<string, [Contender, LoopSpec, string[]?]>,
  pairs: number,
  forwards: number,
): Promise<Record<string, number[]>> {
  const names = Object.keys(specs);
  const medians: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let p = 0; p < pairs; p++) {
    for (const name of p % 2 ? [...names].reverse() : names) {
      const [contender, spec, options] = specs[name]!;
      const runner = await Runner.start(contender, spec, options);
      try {
        await runner.forwards(5);
        medians[name]!.push(median(await runner.forwards(forwards)));
      } finally {
        await runner.close();
      }
    }
  }
  return medians;
}

/** Starts one runner per entry, hands them to `use`, and closes them all whatever happens. */
export async function withRunners<T>(
  specs: Record<string, [Contender, LoopSpec, string[]?]>,
  use: (runners: Record<string, Runner>) => Promise<T>,
): Promise<T> {
  const runners: Record<string, Runner> = {};
  try {
    for (const [name, [contender, spec, options]] of Object.entries(specs))
      runners[name] = await Runner.start(contender, spec, options);
    return await use(runners);
  } finally {
    await Promise.all(Object.values(runners).map((r) => r.close()));
  }
}
