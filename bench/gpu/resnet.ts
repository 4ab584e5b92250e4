/**
 * The GPU rows of bench/README: Kiln's PyTorch engine against Python torch on one device,
 * with bench/libtorch's runners (each contender its own process, model loaded, short segments
 * of forwards taken in turns so that all see the same machine state; ratios per segment).
 *
 *   node -C @kiln/source --import tsx bench/gpu/resnet.ts [--device cuda:0] [--arch resnet50]
 *       [--batch 32] [--large-batch 128] [--segments 10] [--forwards 8] [--threads 4]
 *
 * 1. Kiln ÷ Python torch at `--batch`, one forward in flight each: host input in, host output
 *    back (goal ≥ 0.97×).
 * 2. At `--large-batch`: Python torch with page-locked buffers and copies queued on two side
 *    streams ÷ Python torch plain (x.to(device), forward, .cpu()): what the technique gains on
 *    this GPU (Infery reports about +27%).
 * 3. At `--large-batch`: Kiln (which always copies through page-locked memory on a side
 *    stream per forward) with 2 forwards in flight ÷ Python torch plain, and ÷ Kiln with 1.
 * Every figure is printed as one `figure:` line: what ÷ what, its setting, median [min–max].
 * On `--device cpu` the same steps run (pinning and streams need CUDA and are left out) to
 * check the kit; those are not GPU figures and say so.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type Spread, formatSpread, goalLine, ratioSpread } from '../harness/figures.js';
import { PYTHON, type LoopSpec, makeResnet, turns, withRunners } from '../libtorch/contenders.js';

const { values: args } = parseArgs({
  options: {
    device: { type: 'string', default: 'cuda:0' },
    arch: { type: 'string', default: 'resnet50' },
    batch: { type: 'string', default: '32' },
    'large-batch': { type: 'string', default: '128' },
    segments: { type: 'string', default: '10' },
    forwards: { type: 'string', default: '8' },
    threads: { type: 'string', default: String(Math.min(4, availableParallelism())) },
  },
});
const device = args.device;
const onCpu = device === 'cpu';
if (args.arch !== 'resnet18' && args.arch !== 'resnet50')
  throw new Error('--arch resnet18|resnet50');
const arch = args.arch;
const batch = Number(args.batch);
const largeBatch = Number(args['large-batch']);
const segments = Number(args.segments);
const threads = Number(args.threads);
/** Forwards per segment (at least 2, so that 2 in flight overlap). */
const forwards = Math.max(2, Number(args.forwards));

/** What Python's torch says about the device. */
function pythonDevice(): string {
  const script =
    'import sys, torch\n' +
    'd = sys.argv[1]\n' +
    'name = torch.cuda.get_device_name(d) if d.startswith("cuda") else "CPU"\n' +
    'print(f"{name}, torch {torch.__version__} (CUDA {torch.version.cuda})")';
  return execFileSync(PYTHON, ['-c', script, device], { encoding: 'utf8' }).trim();
}

const name = arch === 'resnet50' ? 'ResNet-50' : 'ResNet-18';
const setting = (b: number, more: string) => `${name}, batch ${b}, ${device}, fp32, ${more}`;
/** One figure: `figure: what (setting): median [min–max]×`, with its goal when it has one. */
function figure(what: string, at: string, spread: Spread, goal?: number): void {
  const label = `figure: ${what} (${at})`;
  console.log(
    goal === undefined
      ? `${label}: ${formatSpread(spread, 2)}×`
      : goalLine(label, spread, { atLeast: goal }),
  );
}

const dir = await mkdtemp(join(tmpdir(), 'kiln-bench-gpu-'));
try {
  await makeResnet(join(dir, 'model.pt'), arch);
  console.log(
    `resnet: ${name} (torchvision, random weights, torch.jit.script) on ${device}: ${pythonDevice()}; ` +
      `${threads} intra-op thread(s), ${segments} segments of ${forwards} forwards, Node ${process.version}, ${availableParallelism()} cores` +
      (onCpu ? '\nresnet: RAN ON THE CPU to check the kit; these are not GPU figures' : ''),
  );
  const spec = (b: number, more: Partial<LoopSpec> = {}): LoopSpec => ({
    modelDir: dir,
    threads,
    batch: b,
    device,
    ...more,
  });

  const small = await withRunners(
    { kiln: ['kiln', spec(batch)], python: ['python', spec(batch)] },
    (runners) => turns(runners, segments, forwards),
  );
  figure(
    'kiln ÷ python torch, throughput',
    setting(batch, 'host in and out, 1 forward in flight each'),
    ratioSpread(small.python!, small.kiln!),
    0.97,
  );

  const large = await withRunners(
    {
      plain: ['python', spec(largeBatch)],
      pinned: ['python', spec(largeBatch, { copies: 'pinned-streams' })],
      kiln1: ['kiln', spec(largeBatch)],
      kiln2: ['kiln', spec(largeBatch, { inflight: 2 })],
    },
    (runners) => turns(runners, segments, forwards),
  );
  figure(
    onCpu
      ? 'python torch pipelined ÷ plain, throughput (no pinning or streams on the CPU)'
      : 'python torch pinned + 2 side streams ÷ plain, throughput',
    setting(largeBatch, 'host in and out'),
    ratioSpread(large.plain!, large.pinned!),
  );
  figure(
    'kiln, 2 in flight ÷ python torch plain, throughput',
    setting(largeBatch, 'host in and out'),
    ratioSpread(large.plain!, large.kiln2!),
  );
  figure(
    'kiln, 2 in flight ÷ 1 in flight, throughput',
    setting(largeBatch, 'host in and out'),
    ratioSpread(large.kiln1!, large.kiln2!),
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
