// Tokens/s of this tree's rolling batching against an older build's (default e8bcdc3, checked
// out at --old), in alternating rounds, each round a process of its own (ab-round.ts). Both
// builds get the same model, the same requests at the same arrival times through the same
// client, the same max batch, intra-op threads and environment; each runs generation the way
// its server does: this tree through a generation pool (the step worker decodes and samples on
// its thread, only token ids cross), e8bcdc3 through a RollingScheduler on the main thread over
// an OrtStepDecoder thread (full logits cross every step). HTTP and prompt tokenizing are left
// out of both, as in run.ts. See bench/README.md.
//   git worktree add /work/old e8bcdc3 && (cd /work/old && npm ci && npx tsc -b tsconfig.json)
//   node -C @kiln/source --import tsx bench/rolling-batch/ab-old-build.ts [--old /work/old] [--quick]
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  formatSpread,
  goalLine,
  loadAverage,
  machineLine,
  ratioSpread,
  spreadOf,
} from '../harness/figures.js';
import { orderOf } from '../harness/rounds.js';
import {
  BENCH_MODEL_OPTIONS,
  type BenchModel,
  benchModelFrom,
  randomModel,
} from './bench-model.js';
import { makeWorkload } from './workload.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const CURRENT = resolve(HERE, '..', '..');

const { values } = parseArgs({
  options: {
    old: { type: 'string', default: '/work/old' },
    rounds: { type: 'string', default: '3' },
    requests: { type: 'string', default: '64' },
    'gap-ms': { type: 'string', default: '15' },
    'prompt-max': { type: 'string', default: '64' },
    'output-max': { type: 'string', default: '256' },
    /** The rolling contender's max batch (run.ts's "rolling (max 16)"). */
    'max-batch': { type: 'string', default: '16' },
    threads: { type: 'string', default: '1' },
    /** A check that both builds run end to end: a small random decoder, 8 short requests. */
    quick: { type: 'boolean', default: false },
    ...BENCH_MODEL_OPTIONS,
  },
});
const quick = values.quick;
const rounds = Math.max(3, Number(values.rounds));
const old = resolve(values.old);
for (const needed of ['node_modules', 'packages/batching/src/index.ts'])
  if (!existsSync(join(old, needed)))
    throw new Error(
      `${old} is no installed Kiln checkout (no ${needed}); make one with: git worktree add ${old} e8bcdc3 && cd ${old} && npm ci && npx tsc -b tsconfig.json`,
    );

const root = await mkdtemp(join(tmpdir(), 'kiln-bench-rolling-ab-'));
const model: BenchModel = quick
  ? await randomModel(root, { layers: 1, hidden: 64, heads: 2, attentionDim: 32 })
  : await benchModelFrom(values, root);
const config = JSON.parse(await readFile(join(model.dir, 'config.json'), 'utf8')) as {
  vocab_size: number;
};
const workload = makeWorkload({
  requests: quick ? 8 : Number(values.requests),
  vocab: config.vocab_size,
  promptMin: 8,
  promptMax: quick ? 16 : Number(values['prompt-max']),
  outputMin: 8,
  outputMax: quick ? 24 : Number(values['output-max']),
  meanGapMs: Number(values['gap-ms']),
  seed: 7,
  ...(model.prompt ? { prompt: model.prompt } : {}),
});
const workloadFile = join(root, 'workload.json');
await writeFile(workloadFile, JSON.stringify(workload));

/** What ab-round.ts reports of one round. */
interface Round {
  readonly path: string;
  readonly tokens: number;
  readonly tokensPerS: number;
  readonly ttftP50Ms: number;
  readonly steps: number;
  readonly meanBatch: number;
  readonly messagesMsPerStep: number;
  readonly outputsDigest: string;
}

/** One round of `build` in a fresh node process started in its folder (its own tsx). */
function runRound(build: string): Promise<Round> {
  const args = [
    '--conditions=@kiln/source',
    '--import',
    'tsx',
    join(HERE, 'ab-round.ts'),
    ...['--build', build, '--model', model.dir, '--workload', workloadFile],
    ...['--max-batch', values['max-batch'], '--threads', values.threads],
  ];
  const child = spawn(process.execPath, args, {
    cwd: build,
    env: process.env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
  return new Promise((resolveRound, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('ROUND '));
      if (code !== 0 || !line)
        reject(new Error(`the round in ${build} ended with ${code}:\n${out}`));
      else resolveRound(JSON.parse(line.slice('ROUND '.length)) as Round);
    });
  });
}

const builds = { new: CURRENT, old };
type Build = keyof typeof builds;
console.log(machineLine());
console.log(`new: ${CURRENT}; old: ${old}`);
console.log(
  `model: ${model.description}; rolling max ${values['max-batch']}, intra-op threads ${values.threads}; ${workload.requests.length} requests, ${workload.requests.reduce((n, r) => n + r.maxNewTokens, 0)} tokens, greedy, no end-of-sequence`,
);
const figures: Record<Build, Round[]> = { new: [], old: [] };
for (let round = 0; round < rounds; round++) {
  for (const build of orderOf<Build>(['old', 'new'], round)) {
    const r = await runRound(builds[build]);
    figures[build].push(r);
    console.log(
      `round ${round + 1} ${build} ${r.tokensPerS.toFixed(0).padStart(6)} tokens/s  TTFT p50 ${r.ttftP50Ms.toFixed(0)} ms  ${r.steps} steps of ${r.meanBatch.toFixed(1)}  messages ${r.messagesMsPerStep.toFixed(3)} ms/step  load ${loadAverage()}`,
    );
  }
}

const series = (build: Build, pick: (r: Round) => number) => figures[build].map(pick);
console.log(`\nmedian [min–max] over ${rounds} rounds`);
for (const build of ['old', 'new'] as const) {
  console.log(
    `${build}: ${figures[build][0]!.path}\n  tokens/s ${formatSpread(spreadOf(series(build, (r) => r.tokensPerS)), 0)}  messages between threads ${formatSpread(spreadOf(series(build, (r) => r.messagesMsPerStep)), 3)} ms per step`,
  );
}
console.log(
  goalLine(
    'tokens/s new ÷ old (same rounds)',
    ratioSpread(
      series('new', (r) => r.tokensPerS),
      series('old', (r) => r.tokensPerS),
    ),
    { atLeast: 1 },
  ),
);
console.log(
  goalLine(
    'new: messages between threads per step',
    spreadOf(series('new', (r) => r.messagesMsPerStep)),
    { atMost: 0.1 },
    ' ms',
    3,
  ),
);
const digests = new Set([...figures.old, ...figures.new].map((r) => r.outputsDigest));
console.log(`both builds generated the same tokens for every request: ${digests.size === 1}`);
console.log(machineLine());
await rm(root, { recursive: true, force: true });
