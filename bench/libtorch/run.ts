/**
 * Kiln's PyTorch engine against a plain C++ loop over the same LibTorch and against Debian's
 * Python torch, on torchvision's ResNet-18 (random weights, scripted by /usr/bin/python3 at
 * bench time), with the same intra-op threads, at batch 1 and 8. Each contender is its own
 * process with the model loaded; they take turns running short segments of forwards (the
 * order shuffled, the same every run), so all see the same machine load. Kiln runs at its defaults
 * (optimize_for_inference on); Python and C++ run the module as loaded, and Python also frozen
 * as torch's docs advise (`optimize_for_inference(freeze(m))`, one line). Then Kiln's fixed
 * cost per call, optimize_for_inference on vs off, and the memory of 4 predictors against 1.
 *
 *   node -C @kiln/source --import tsx bench/libtorch/run.ts [--segments 12] [--threads 2] [--batches 1,8]
 *                                           [--omp-wait-policy passive] [--malloc retain|one-arena]
 *                                           [--alone 8]
 *
 * `--alone N` then measures Kiln against frozen Python with each process alone on the machine:
 * N pairs of fresh processes, one started, warmed up, timed and closed before the next starts,
 * the order alternating. Processes waiting their turn leave threads spinning or yielding on the
 * cores (OpenMP teams, OpenBLAS) and one LibTorch binary's speed differs from process to
 * process; pairs of fresh processes take both out of the ratio.
 *
 * `--omp-wait-policy` sets OMP_WAIT_POLICY for every measured process. By default OpenMP
 * spins at barriers while a process has no more OpenMP threads than cores: fast on an idle
 * machine, very slow on one whose cores other work keeps busy (a spinning thread waits for a
 * descheduled one). `passive` takes that difference out of the comparison.
 *
 * `--malloc` tunes glibc's malloc for every measured process. `retain` sets
 * MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ so that freed activations stay in malloc's
 * arenas instead of going back to the system and faulting in again next forward; `one-arena`
 * adds MALLOC_ARENA_MAX=1. The C++ and Python loops run forward on the main thread, whose arena
 * grows without limit; Kiln runs it on other threads, whose arenas are built of 64 MiB heaps
 * and mmap anything that does not fit one, each forward anew (at batch 8, about 10,000 more
 * page faults per forward). One arena puts Kiln's threads on the main thread's terms.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { saveScriptModule } from '@kiln/engine-libtorch';
import {
  buildBaseline,
  childEnv,
  makeResnet,
  alone,
  median,
  memory,
  turns,
  withRunners,
} from './contenders.js';
import { machineLine } from '../harness/figures.js';

const { values: args } = parseArgs({
  options: {
    segments: { type: 'string', default: '12' },
    threads: { type: 'string', default: String(Math.min(2, availableParallelism())) },
    batches: { type: 'string', default: '1,8' },
    'omp-wait-policy': { type: 'string' },
    malloc: { type: 'string', default: 'default' },
    alone: { type: 'string', default: '0' },
  },
});
if (args['omp-wait-policy']) childEnv.OMP_WAIT_POLICY = args['omp-wait-policy'];
if (args.malloc === 'retain' || args.malloc === 'one-arena') {
  childEnv.MALLOC_MMAP_THRESHOLD_ = String(256 * 1024 * 1024);
  childEnv.MALLOC_TRIM_THRESHOLD_ = String(1024 * 1024 * 1024);
}
if (args.malloc === 'one-arena') childEnv.MALLOC_ARENA_MAX = '1';
const segments = Number(args.segments);
const threads = Number(args.threads);
const batches = args.batches.split(',').map(Number);
const alonePairs = Number(args.alone);
/** Forwards per segment: half a second or more of work on two cores. */
const forwardsFor = (batch: number) => Math.max(3, Math.round(10 / batch));

const fmt = (n: number, digits = 2) => n.toFixed(digits);
const range = (values: number[]) => `[${fmt(Math.min(...values))}–${fmt(Math.max(...values))}]`;

const ratio = (slow: number[], fast: number[]) => median(slow.map((v, i) => v / fast[i]!));
/** The range of the same per-forward ratios: [min–max]. */
const spread = (slow: number[], fast: number[]) => {
  const ratios = slow.map((v, i) => v / fast[i]!);
  return `[${fmt(Math.min(...ratios))}–${fmt(Math.max(...ratios))}]`;
};

const dir = await mkdtemp(join(tmpdir(), 'kiln-bench-libtorch-'));
try {
  await Promise.all([makeResnet(join(dir, 'model.pt')), buildBaseline()]);
  console.log(
    `libtorch: ResNet-18 (torchvision, random weights, torch.jit.script), ${threads} intra-op thread(s), ${segments} segments per batch, ` +
      `OMP_WAIT_POLICY=${childEnv.OMP_WAIT_POLICY ?? '(default)'}, malloc ${args.malloc}, ` +
      machineLine(),
  );

  let resnetB1Ms = Number.NaN;
  for (const batch of batches) {
    const spec = { modelDir: dir, threads, batch };
    const m = await withRunners(
      {
        kiln: ['kiln', spec],
        cpp: ['cpp', spec],
        python: ['python', spec],
        frozen: ['python-frozen', spec],
      },
      (runners) => turns(runners, segments, forwardsFor(batch)),
    );
    if (batch === 1) resnetB1Ms = median(m.cpp!);
    console.log(
      `batch ${batch}: median ms/forward kiln ${fmt(median(m.kiln!))} | c++ ${fmt(median(m.cpp!))} | python ${fmt(median(m.python!))} | python frozen ${fmt(median(m.frozen!))}\n` +
        `  kiln vs c++ loop        ${fmt(ratio(m.cpp!, m.kiln!))}× throughput (target ≥ 0.97)\n` +
        `  kiln vs python          ${fmt(ratio(m.python!, m.kiln!))}× throughput (target ≥ ${batch === 1 ? '1.1' : '1.0'})\n` +
        `  kiln vs python frozen   ${fmt(ratio(m.frozen!, m.kiln!))}× throughput (target ≥ 1.0; ${spread(m.frozen!, m.kiln!)} over segments)`,
    );
  }

  for (const batch of alonePairs > 0 ? batches : []) {
    const spec = { modelDir: dir, threads, batch };
    const m = await alone(
      { kiln: ['kiln', spec], frozen: ['python-frozen', spec] },
      alonePairs,
      3 * forwardsFor(batch),
    );
    console.log(
      `batch ${batch}, each process alone (${alonePairs} pairs of fresh processes): median ms/forward kiln ${fmt(median(m.kiln!))} ${range(m.kiln!)} | python frozen ${fmt(median(m.frozen!))} ${range(m.frozen!)}\n` +
        `  kiln vs python frozen   ${fmt(ratio(m.frozen!, m.kiln!))}× throughput (target ≥ 1.0; ${spread(m.frozen!, m.kiln!)} over pairs)`,
    );
  }

  // Kiln's fixed cost (copy in, thread hop, copy out) on a model that does almost nothing with
  // the same input.
  const tinyDir = join(dir, 'tiny');
  await mkdir(tinyDir);
  await saveScriptModule(join(tinyDir, 'model.pt'), {
    source: 'def forward(self, x: Tensor) -> Tensor:\n    return x.mean(dim=[2, 3])\n',
  });
  const tiny = { modelDir: tinyDir, threads, batch: 1 };
  const t = await withRunners({ kiln: ['kiln', tiny], cpp: ['cpp', tiny] }, (runners) =>
    turns(runners, 5, 200),
  );
  const overhead = median(t.kiln!) - median(t.cpp!);
  console.log(
    `fixed cost per forward (1×3×224×224 in, 1×3 out): kiln ${fmt(median(t.kiln!), 3)} ms | c++ ${fmt(median(t.cpp!), 3)} ms → ` +
      `${fmt(overhead, 3)} ms per call, ${fmt((100 * overhead) / resnetB1Ms, 1)}% of a ResNet-18 batch-1 forward`,
  );

  const b1 = { modelDir: dir, threads, batch: 1 };
  const o = await withRunners(
    { plain: ['kiln', b1, ['optimize_for_inference=false']], optimized: ['kiln', b1] },
    (runners) => turns(runners, Math.ceil(segments / 2), forwardsFor(1)),
  );
  console.log(
    `optimize_for_inference (batch 1, on by default): off ${fmt(median(o.plain!))} → on ${fmt(median(o.optimized!))} ms/forward, ${fmt(ratio(o.plain!, o.optimized!))}× faster`,
  );

  const one = await memory(dir, 'shared', 1, 3);
  const four = await memory(dir, 'shared', 4, 3);
  const separate = await memory(dir, 'separate', 4, 3);
  console.log(
    `memory (peak RSS, batch 1, 3 rounds of concurrent forwards): 1 predictor ${fmt(one.peakMiB, 0)} MiB | 4 predictors ${fmt(four.peakMiB, 0)} MiB ` +
      `(${fmt(four.peakMiB / one.peakMiB)}×, target ≤ 1.1) | 4 separately loaded models ${fmt(separate.peakMiB, 0)} MiB (${fmt(separate.peakMiB / one.peakMiB)}×)`,
  );
  console.log(`end: ${machineLine()}`);
} finally {
  await rm(dir, { recursive: true, force: true });
}
