// bench/server: Kiln over HTTP against the server a Node user would write by hand (Koa +
// onnxruntime-node, npy in and npy out, its own process) and against Kiln in process, on a tiny
// MLP and a ResNet-18-class model. Contenders alternate (A B, B A, …) over the rounds; every
// figure is printed as median [min–max] over the rounds, every ratio from the same rounds.
//   node -C @kiln/source --import tsx bench/server/run.ts [--seconds 8] [--rounds 3] [--only mlp,resnet18]
//     [--no-ping]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { decodeNpy } from '@kiln/core';
import { mlpModel, resnetModel } from '@kiln/model-tools';
import {
  type Goal,
  type Spread,
  formatSpread,
  goalLine,
  machineLine,
  ratioSpread,
  spreadOf,
} from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import {
  type RunningServer,
  type Workload,
  buildKilnCli,
  mainThreadCpuUs,
  npyBody,
  startBarePing,
  startInProcess,
  startKiln,
  startFloor,
  startNaive,
} from './contenders.js';
import { type LoadOptions, type LoadResult, pingWhile, runLoad } from './load-generator.js';
import { runWrk, wrkAvailable } from './wrk-load.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    only: { type: 'string' },
    'no-ping': { type: 'boolean', default: false },
  },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
// wrk leaves the cores to the servers; the Node client is the fallback where wrk is missing.
const useWrk = wrkAvailable();
const load = (options: LoadOptions): Promise<LoadResult> =>
  useWrk ? runWrk(options) : runLoad(options);
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-server-'));

/**
 * A server under test: Kiln with some serving.properties, the naive server, in process, or the
 * floor (floor-server.mjs: Kiln's design with none of Kiln's code, a reference).
 */
interface ContenderSpec {
  readonly name: string;
  readonly kind: 'kiln' | 'naive' | 'in-process' | 'floor';
  /** serving.properties for Kiln; none means Kiln's defaults. */
  readonly properties?: Readonly<Record<string, string>>;
  /** Server settings for Kiln, as KILN_* environment variables. */
  readonly env?: Readonly<Record<string, string>>;
}

interface Ratio {
  readonly label: string;
  readonly of: string;
  readonly over: string;
  /** None for a reference (a figure to read, not a goal to meet). */
  readonly goal?: Goal;
}

interface Scenario {
  readonly label: string;
  readonly model: () => Promise<{ dir: string; inputName: string; dims: number[] }>;
  readonly concurrency: number;
  readonly contenders: readonly ContenderSpec[];
  readonly ratios: readonly Ratio[];
  /**
   * Contenders whose /ping p99 under this load is held to the goal (in ms), and its ratio to
   * the bare probe's p99 in the same pass to PING_RATIO_GOAL.
   */
  readonly pingGoal?: { readonly contenders: readonly string[]; readonly goal: Goal };
  /** Runs only when named by --only. */
  readonly onlyWhenAsked?: boolean;
  /** Main-thread CPU a request of one contender over another's, from the same rounds. */
  readonly mainThreadCpu?: { readonly of: string; readonly over: string; readonly goal: Goal };
}

/** /ping p99 under load ÷ the same probe's p99 against an idle bare server in the same pass. */
const PING_RATIO_GOAL: Goal = { atMost: 1.2 };

// 64 → 256 → 256 → 10: a model whose forward costs less than its HTTP request. Made once.
let mlp: Promise<{ dir: string; inputName: string; dims: number[] }> | undefined;
function tinyMlp() {
  mlp ??= mlpModel(path.join(root, 'mlp'), {
    inputSize: 64,
    hidden: [256, 256],
    outputSize: 10,
  }).then((m) => ({ dir: m.dir, inputName: 'x', dims: [1, 64] }));
  return mlp;
}

const scenarios: Scenario[] = [
  {
    label: 'mlp',
    model: tinyMlp,
    concurrency: 64,
    contenders: [
      { name: 'kiln defaults', kind: 'kiln' },
      // The defaults without the event-loop turn budget: what the budget buys the probe.
      { name: 'kiln budget off', kind: 'kiln', env: { KILN_EVENT_LOOP_TURN_BUDGET_MS: '0' } },
      { name: 'kiln auto', kind: 'kiln', properties: { placement: 'auto' } },
      { name: 'kiln inline', kind: 'kiln', properties: { placement: 'inline' } },
      {
        name: 'kiln batch 32',
        kind: 'kiln',
        properties: { batch_size: '32', max_batch_delay: '2' },
      },
      // Two server processes on the shared listeners (ingress_processes=2).
      { name: 'kiln 2 processes', kind: 'kiln', env: { KILN_INGRESS_PROCESSES: '2' } },
      {
        name: 'kiln 2 processes inline',
        kind: 'kiln',
        env: { KILN_INGRESS_PROCESSES: '2' },
        properties: { placement: 'inline' },
      },
      { name: 'naive koa+ort', kind: 'naive' },
      { name: 'floor', kind: 'floor' },
    ],
    ratios: [
      {
        label: 'kiln defaults ÷ naive',
        of: 'kiln defaults',
        over: 'naive koa+ort',
        goal: { atLeast: 2.5 },
      },
      // How close Kiln's defaults come to its design written bare.
      {
        label: 'kiln defaults ÷ floor',
        of: 'kiln defaults',
        over: 'floor',
        goal: { atLeast: 0.8 },
      },
      { label: 'kiln batch 32 ÷ naive', of: 'kiln batch 32', over: 'naive koa+ort' },
      {
        label: 'kiln 2 processes ÷ naive',
        of: 'kiln 2 processes',
        over: 'naive koa+ort',
        goal: { atLeast: 3 },
      },
      {
        label: 'kiln 2 processes inline ÷ naive',
        of: 'kiln 2 processes inline',
        over: 'naive koa+ort',
      },
      {
        // The budget must not cost throughput.
        label: 'kiln defaults ÷ kiln budget off',
        of: 'kiln defaults',
        over: 'kiln budget off',
        goal: { atLeast: 1 },
      },
      {
        // What placement=auto chooses between (the server's default runs on threads).
        label: 'kiln inline ÷ kiln defaults',
        of: 'kiln inline',
        over: 'kiln defaults',
        goal: { atLeast: 1 },
      },
    ],
    pingGoal: {
      contenders: ['kiln defaults', 'kiln budget off', 'kiln 2 processes'],
      goal: { atMost: 5 },
    },
    mainThreadCpu: { of: 'kiln defaults', over: 'floor', goal: { atMost: 1.3 } },
  },
  {
    label: 'mlp-batching',
    model: tinyMlp,
    concurrency: 32,
    contenders: [
      { name: 'kiln batch 1', kind: 'kiln', properties: { batch_size: '1' } },
      {
        name: 'kiln batch 8',
        kind: 'kiln',
        properties: { batch_size: '8', max_batch_delay: '2' },
      },
    ],
    ratios: [
      {
        label: 'batch 8 ÷ batch 1',
        of: 'kiln batch 8',
        over: 'kiln batch 1',
        goal: { atLeast: 4 },
      },
    ],
  },
  {
    label: 'resnet18',
    model: async () => {
      const resnet = await resnetModel(path.join(root, 'resnet18'), { depth: 18 });
      return { dir: resnet.dir, inputName: 'input', dims: [1, 3, 224, 224] };
    },
    concurrency: 16,
    contenders: [
      { name: 'kiln defaults', kind: 'kiln' },
      { name: 'kiln 2 processes', kind: 'kiln', env: { KILN_INGRESS_PROCESSES: '2' } },
      { name: 'in-process', kind: 'in-process' },
      { name: 'naive koa+ort', kind: 'naive' },
    ],
    ratios: [
      {
        label: 'kiln defaults ÷ naive',
        of: 'kiln defaults',
        over: 'naive koa+ort',
        goal: { atLeast: 1.1 },
      },
      { label: 'kiln 2 processes ÷ naive', of: 'kiln 2 processes', over: 'naive koa+ort' },
      {
        label: 'HTTP ÷ in-process',
        of: 'kiln defaults',
        over: 'in-process',
        goal: { atLeast: 0.95 },
      },
    ],
    pingGoal: { contenders: ['kiln defaults', 'naive koa+ort'], goal: { atMost: 5 } },
  },
];

// ResNet-18 at c16 under other layouts than the defaults: which one the defaults should be
// (run with --only resnet18-layouts). Each is set against the naive server.
const layouts: ContenderSpec[] = [
  { name: 'kiln defaults', kind: 'kiln' },
  { name: 'kiln spinning', kind: 'kiln', properties: { 'option.allowSpinning': 'true' } },
  { name: 'kiln batch 1', kind: 'kiln', properties: { batch_size: '1' } },
  {
    name: 'kiln 2 workers × 1 thread',
    kind: 'kiln',
    properties: { minWorkers: '2', maxWorkers: '2', 'option.intraOpNumThreads': '1' },
  },
];
scenarios.push({
  label: 'resnet18-layouts',
  onlyWhenAsked: true,
  model: scenarios.find((s) => s.label === 'resnet18')!.model,
  concurrency: 16,
  contenders: [...layouts, { name: 'naive koa+ort', kind: 'naive' }],
  ratios: layouts.map((layout) => ({
    label: `${layout.name} ÷ naive`,
    of: layout.name,
    over: 'naive koa+ort',
    ...(layout.properties ? {} : { goal: { atLeast: 1.1 } }),
  })),
});

interface Started {
  readonly spec: ContenderSpec;
  readonly workload: Workload;
  readonly server?: RunningServer;
  readonly inProcess?: Awaited<ReturnType<typeof startInProcess>>;
}

/** Each contender gets its own copy of the model folder, with its own serving.properties. */
async function start(
  spec: ContenderSpec,
  scenario: Scenario,
  model: { dir: string; inputName: string; dims: number[] },
  port: number,
): Promise<Started> {
  const dir = path.join(root, `${scenario.label}-${spec.name.replace(/\W+/g, '-')}`);
  fs.cpSync(model.dir, dir, { recursive: true });
  const properties = spec.properties ?? {};
  const lines = Object.entries(properties).map(([k, v]) => `${k}=${v}`);
  if (lines.length)
    fs.appendFileSync(path.join(dir, 'serving.properties'), `${lines.join('\n')}\n`);
  const workload: Workload = {
    label: scenario.label,
    modelDir: dir,
    modelName: 'm',
    inputName: model.inputName,
    dims: model.dims,
    concurrency: scenario.concurrency,
    properties,
  };
  if (spec.kind === 'kiln')
    return { spec, workload, server: await startKiln(workload, port, [], spec.env) };
  if (spec.kind === 'naive') return { spec, workload, server: await startNaive(workload, port) };
  if (spec.kind === 'floor') return { spec, workload, server: await startFloor(workload, port) };
  return { spec, workload, inProcess: await startInProcess(workload) };
}

function routeOf(started: Started): string {
  return started.spec.kind === 'naive' || started.spec.kind === 'floor'
    ? '/infer'
    : `/predictions/${started.workload.modelName}`;
}

const npyHeaders = { 'content-type': 'tensor/npy', accept: 'tensor/npy' };

/**
 * One closed-loop pass at the scenario's concurrency; returns requests per second. For a server
 * of one process, `cpu` hears how many µs of CPU its main thread spent a request in the pass.
 */
async function throughputOf(
  started: Started,
  durationMs: number,
  cpu?: (usPerRequest: number) => void,
): Promise<number> {
  if (started.inProcess) return (await started.inProcess.run(durationMs)).throughput;
  const pid = started.server!.pid;
  const cpuBefore = pid === undefined ? undefined : mainThreadCpuUs(pid);
  const result = await load({
    url: `${started.server!.url}${routeOf(started)}`,
    body: npyBody(started.workload),
    headers: npyHeaders,
    concurrency: started.workload.concurrency,
    durationMs,
  });
  if (result.errors > 0) throw new Error(`${started.spec.name}: ${result.errors} failed requests`);
  const cpuAfter = pid === undefined ? undefined : mainThreadCpuUs(pid);
  if (cpu && cpuBefore !== undefined && cpuAfter !== undefined && result.requests > 0)
    cpu((cpuAfter - cpuBefore) / result.requests);
  return result.throughput;
}

/**
 * /ping's p99 while the contender is under the scenario's load, in ms, and in the same pass
 * the p99 of the same probe against `floorUrl`, an idle bare server: what the probe itself
 * waits for a core while the load runs.
 */
async function pingP99Of(
  started: Started,
  durationMs: number,
  floorUrl: string,
): Promise<{ p99: number; floorP99: number }> {
  const ping = pingWhile(`${started.server!.url}/ping`);
  const floor = pingWhile(`${floorUrl}/ping`);
  await throughputOf(started, durationMs);
  const [own, bare] = await Promise.all([ping.stop(), floor.stop()]);
  return { p99: own.p99, floorP99: bare.p99 };
}

/**
 * Kiln's own event-loop delay p99 over a pass, ms: its gauge covers the time since the last
 * scrape, so a scrape before the pass starts the window (with several processes, the worst).
 */
async function loopP99During<T>(started: Started, pass: () => Promise<T>) {
  const metricsUrl = started.server!.url.replace(/:(\d+)$/, (_, p) => `:${Number(p) + 2}/metrics`);
  await (await fetch(metricsUrl)).text();
  const value = await pass();
  const text = await (await fetch(metricsUrl)).text();
  const p99 = /^kiln_nodejs_eventloop_lag_p99_seconds (\S+)$/m.exec(text);
  return { value, loopP99Ms: p99 ? Number(p99[1]) * 1000 : Number.NaN };
}

/** Every HTTP contender answers the same request with the same numbers. */
async function checkSameAnswers(all: readonly Started[]): Promise<void> {
  const answers: { name: string; data: Float32Array }[] = [];
  for (const s of all) {
    if (!s.server) continue;
    const response = await fetch(`${s.server.url}${routeOf(s)}`, {
      method: 'POST',
      body: npyBody(s.workload),
      headers: npyHeaders,
    });
    if (!response.ok)
      throw new Error(`${s.spec.name}: ${response.status} ${await response.text()}`);
    const tensor = decodeNpy(new Uint8Array(await response.arrayBuffer()));
    answers.push({ name: s.spec.name, data: tensor.data as Float32Array });
  }
  const [first, ...rest] = answers;
  for (const other of rest) {
    const diff = Math.max(...first!.data.map((v, i) => Math.abs(v - other.data[i]!)));
    if (!(diff <= 1e-4) || other.data.length !== first!.data.length)
      throw new Error(`${other.name} answers differently from ${first!.name} (max diff ${diff})`);
  }
}

async function runScenario(scenario: Scenario, portBase: number): Promise<void> {
  const model = await scenario.model();
  const started: Started[] = [];
  try {
    for (const [i, spec] of scenario.contenders.entries())
      started.push(await start(spec, scenario, model, portBase + i * 10));
    await checkSameAnswers(started);
    // Main-thread µs a request, per contender, one entry per measured round.
    const cpu = new Map<string, number[]>();
    const contenders = started.map((s) => ({
      name: s.spec.name,
      measure: (round: number) =>
        round < 0
          ? throughputOf(s, 2000)
          : throughputOf(s, seconds * 1000, (us) =>
              cpu.set(s.spec.name, [...(cpu.get(s.spec.name) ?? []), us]),
            ),
    }));
    const throughput = await alternateRounds(contenders, { rounds, warmupRounds: 1 });
    console.log(
      `\n${scenario.label}: concurrency ${scenario.concurrency}, ${seconds} s per round, ${rounds} rounds; ${machineLine()}`,
    );
    for (const s of started) {
      const props = s.spec.properties ? JSON.stringify(s.spec.properties) : 'defaults';
      const where = s.server?.placement ? `; ${s.server.placement}` : '';
      console.log(
        `  ${s.spec.name.padEnd(16)} ${formatSpread(spreadOf(throughput[s.spec.name]!)).padStart(24)} req/s   (${props}${where})`,
      );
    }
    for (const r of scenario.ratios) {
      const spread = ratioSpread(throughput[r.of]!, throughput[r.over]!);
      console.log(
        `  ${r.goal ? goalLine(r.label, spread, r.goal) : `${r.label}: ${formatSpread(spread)}×`}`,
      );
    }
    printMainThreadCpu(scenario, cpu);
    if (scenario.pingGoal && !args['no-ping']) {
      // The probe runs in passes of its own: during throughput passes it would take CPU from
      // the HTTP contenders only.
      const probed = started.filter((s) => scenario.pingGoal!.contenders.includes(s.spec.name));
      const loops = new Map<string, number[]>();
      const floors = new Map<string, number[]>();
      const bare = await startBarePing(portBase + 9);
      const pings = await alternateRounds(
        probed.map((s) => ({
          name: s.spec.name,
          measure: async () => {
            const pass = () => pingP99Of(s, seconds * 1000, bare.url);
            let probe: { p99: number; floorP99: number };
            if (s.spec.kind === 'kiln') {
              const during = await loopP99During(s, pass);
              probe = during.value;
              loops.set(s.spec.name, [...(loops.get(s.spec.name) ?? []), during.loopP99Ms]);
            } else {
              probe = await pass();
            }
            floors.set(s.spec.name, [...(floors.get(s.spec.name) ?? []), probe.floorP99]);
            return probe.p99;
          },
        })),
        { rounds },
      ).finally(() => bare.stop());
      for (const s of probed) {
        const spread: Spread = spreadOf(pings[s.spec.name]!);
        console.log(
          `  ${goalLine(`/ping p99 under load, ${s.spec.name}`, spread, scenario.pingGoal.goal, ' ms', 1)}`,
        );
        console.log(
          `  ${goalLine(`/ping p99 under load ÷ the bare probe's p99 in the same pass, ${s.spec.name}`, ratioSpread(pings[s.spec.name]!, floors.get(s.spec.name)!), PING_RATIO_GOAL)}`,
        );
        const loop = loops.get(s.spec.name);
        if (loop)
          console.log(
            `  ${goalLine(`event-loop delay p99 under load (server's metric), ${s.spec.name}`, spreadOf(loop), scenario.pingGoal.goal, ' ms', 1)}`,
          );
        console.log(
          `  the same probe's p99 against an idle bare node:http server during that load (the machine's floor): ${formatSpread(spreadOf(floors.get(s.spec.name)!))} ms`,
        );
      }
    }
  } finally {
    for (const s of started) await (s.server?.stop() ?? s.inProcess?.stop());
  }
}

/** Each single-process server's main-thread µs a request, and the scenario's ratio of two. */
function printMainThreadCpu(scenario: Scenario, cpu: ReadonlyMap<string, number[]>): void {
  if (cpu.size === 0) return;
  const figures = [...cpu].map(([name, us]) => `${name} ${formatSpread(spreadOf(us), 1)}`);
  console.log(`  main-thread CPU a request, µs (from /proc): ${figures.join(', ')}`);
  const ratio = scenario.mainThreadCpu;
  const of = ratio && cpu.get(ratio.of);
  const over = ratio && cpu.get(ratio.over);
  if (ratio && of && over && of.length === over.length)
    console.log(
      `  ${goalLine(`main-thread CPU a request, ${ratio.of} ÷ ${ratio.over}`, ratioSpread(of, over), ratio.goal)}`,
    );
}

const only = args.only?.split(',');
console.log(
  `bench/server: building kiln (tsc -b apps/cli), then client ${useWrk ? 'wrk' : 'node'}; ${machineLine()}`,
);
buildKilnCli();
let port = 18400;
for (const scenario of scenarios) {
  if (only ? !only.includes(scenario.label) : scenario.onlyWhenAsked) continue;
  await runScenario(scenario, port);
  port += 50;
}
console.log(`\nend: ${machineLine()}`);
fs.rmSync(root, { recursive: true, force: true });
