// bench/server: Kiln over HTTP against Kiln in-process, and against a hand-written Koa +
// onnxruntime-node server, on a ResNet-18-class model, a small MLP and a tiny model. All figures
// of a run come from the same machine state: contenders are interleaved over rounds.
//   node --import tsx bench/server/run.ts [--seconds 10] [--rounds 2] [--only resnet18,mlp,tiny]
//     [--no-ping]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { mlpModel, resnetModel, tinyModel } from '@kiln/model-tools';
import {
  type RunningServer,
  type Workload,
  npyBody,
  startInProcess,
  startKiln,
  startNaive,
  v2BinaryRequest,
} from './contenders.js';
import {
  type LoadOptions,
  type LoadResult,
  pingWhile,
  runLoad as runNodeLoad,
} from './load-generator.js';
import { runWrk, wrkAvailable } from './wrk-load.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const seconds = flag('seconds', 10);
// The /ping probe passes (one more load pass per server and round); --no-ping skips them.
const probePing = !args.includes('--no-ping');
const rounds = flag('rounds', 2);
// wrk leaves the cores to the servers; the Node client is the fallback where wrk is missing.
const useWrk = wrkAvailable();
const runLoad = async (options: LoadOptions): Promise<LoadResult> =>
  useWrk ? runWrk(options) : runNodeLoad(options);
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-server-'));

async function prepare(): Promise<Workload[]> {
  const resnetDir = path.join(root, 'resnet18');
  await resnetModel(resnetDir, { depth: 18 });
  const resnetB1Dir = path.join(root, 'resnet18-b1');
  fs.cpSync(resnetDir, resnetB1Dir, { recursive: true });
  const tinyDir = await tinyModel(path.join(root, 'tiny'));
  const mlp = await mlpModel(path.join(root, 'mlp'), {
    inputSize: 1024,
    hidden: [2048, 2048],
    outputSize: 1000,
  });
  const workloads: Workload[] = [
    // ResNet: two workers, one intra-op thread each (the pool's budget on 2 cores), with
    // dynamic batching of up to 4 — as Kiln would be deployed — and without it.
    {
      label: 'resnet18',
      modelDir: resnetDir,
      modelName: 'resnet',
      inputName: 'input',
      dims: [1, 3, 224, 224],
      concurrency: 8,
      properties: { minWorkers: '2', maxWorkers: '2', batch_size: '4', max_batch_delay: '5' },
    },
    {
      label: 'resnet18-b1',
      modelDir: resnetB1Dir,
      modelName: 'resnet',
      inputName: 'input',
      dims: [1, 3, 224, 224],
      concurrency: 8,
      properties: { minWorkers: '2', maxWorkers: '2', batch_size: '1' },
    },
    // A small MLP whose 8.5 M weights are read once per run: at batch 1 that traffic, not the
    // arithmetic, is the cost of a request, and dynamic batching shares it.
    {
      label: 'mlp',
      modelDir: mlp.dir,
      modelName: 'mlp',
      inputName: 'x',
      dims: [1, 1024],
      concurrency: 64,
      properties: { minWorkers: '1', maxWorkers: '1', batch_size: '32', max_batch_delay: '2' },
    },
    // Tiny (Add + Relu): nothing to amortise, so this shows the fixed cost of each request.
    {
      label: 'tiny',
      modelDir: tinyDir,
      modelName: 'tiny',
      inputName: 'x',
      dims: [1, 4],
      concurrency: 64,
      properties: { minWorkers: '1', maxWorkers: '1', batch_size: '32', max_batch_delay: '2' },
    },
  ];
  for (const w of workloads) {
    const lines = Object.entries(w.properties).map(([k, v]) => `${k}=${v}`);
    fs.appendFileSync(path.join(w.modelDir, 'serving.properties'), `${lines.join('\n')}\n`);
  }
  return workloads;
}

interface Sample {
  throughput: number;
  p50?: number;
  p99?: number;
  pingP99?: number;
  errors?: number;
}

/**
 * One load pass. Throughput passes run without the /ping probe, as the in-process contender
 * does; a separate probe pass measures how the server answers health checks under the load
 * (a probe costs CPU that the 2-core machine's throughput figures would otherwise pay).
 */
async function httpRound(
  server: RunningServer,
  route: string,
  body: Buffer,
  headers: Record<string, string>,
  concurrency: number,
  probe = false,
): Promise<Sample> {
  const ping = probe ? pingWhile(`${server.url}/ping`) : undefined;
  const result: LoadResult = await runLoad({
    url: `${server.url}${route}`,
    body,
    headers,
    concurrency,
    durationMs: seconds * 1000,
  });
  const pings = await ping?.stop();
  return {
    throughput: result.throughput,
    p50: result.p50,
    p99: result.p99,
    pingP99: pings?.p99,
    errors: result.errors,
  };
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const fmt = (n: number | undefined, digits = 1) =>
  n === undefined || Number.isNaN(n) ? '-' : n.toFixed(digits);

async function benchWorkload(w: Workload, portBase: number): Promise<Record<string, Sample[]>> {
  const samples: Record<string, Sample[]> = {
    'in-process': [],
    'kiln /predictions': [],
    'kiln /v2 binary': [],
    'naive koa+ort': [],
  };
  const npy = npyBody(w);
  const v2 = v2BinaryRequest(w);
  const raw = Buffer.from((await import('./contenders.js')).inputTensor(w).data.buffer);
  for (let round = 0; round < rounds; round++) {
    const inProcess = await startInProcess(w);
    await inProcess.run(1000);
    samples['in-process']!.push(await inProcess.run(seconds * 1000));
    await inProcess.stop();

    const kiln = await startKiln(w, portBase);
    await runLoad({
      url: `${kiln.url}/predictions/${w.modelName}`,
      body: npy,
      concurrency: w.concurrency,
      durationMs: 1000,
    });
    samples['kiln /predictions']!.push(
      await httpRound(
        kiln,
        `/predictions/${w.modelName}`,
        npy,
        { 'content-type': 'tensor/npy', accept: 'tensor/npy' },
        w.concurrency,
      ),
    );
    samples['kiln /v2 binary']!.push(
      await httpRound(kiln, `/v2/models/${w.modelName}/infer`, v2.body, v2.headers, w.concurrency),
    );
    if (probePing) {
      const probed = await httpRound(
        kiln,
        `/predictions/${w.modelName}`,
        npy,
        { 'content-type': 'tensor/npy', accept: 'tensor/npy' },
        w.concurrency,
        true,
      );
      samples['kiln /predictions']!.at(-1)!.pingP99 = probed.pingP99;
    }
    await kiln.stop();

    const naive = await startNaive(w, portBase + 10);
    await runLoad({
      url: `${naive.url}/infer`,
      body: raw,
      concurrency: w.concurrency,
      durationMs: 1000,
    });
    const naiveHeaders = { 'content-type': 'application/octet-stream' };
    samples['naive koa+ort']!.push(
      await httpRound(naive, '/infer', raw, naiveHeaders, w.concurrency),
    );
    if (probePing) {
      const probed = await httpRound(naive, '/infer', raw, naiveHeaders, w.concurrency, true);
      samples['naive koa+ort']!.at(-1)!.pingP99 = probed.pingP99;
    }
    await naive.stop();
  }
  return samples;
}

const only = args.includes('--only') ? args[args.indexOf('--only') + 1]!.split(',') : undefined;
const workloads = (await prepare()).filter((w) => !only || only.includes(w.label));
console.log(
  `bench/server: ${os.cpus().length} cores, ${seconds}s per measurement, ${rounds} interleaved rounds (medians), client ${useWrk ? 'wrk' : 'node'}`,
);
let port = 18400;
for (const w of workloads) {
  const samples = await benchWorkload(w, port);
  port += 20;
  const summary = Object.fromEntries(
    Object.entries(samples).map(([name, list]) => [
      name,
      {
        throughput: median(list.map((s) => s.throughput)),
        p50: list[0]!.p50 === undefined ? undefined : median(list.map((s) => s.p50!)),
        p99: list[0]!.p99 === undefined ? undefined : median(list.map((s) => s.p99!)),
        pingP99: list[0]!.pingP99 === undefined ? undefined : median(list.map((s) => s.pingP99!)),
        errors: list.reduce((sum, s) => sum + (s.errors ?? 0), 0),
      },
    ]),
  );
  console.log(`\n${w.label} (concurrency ${w.concurrency}, ${JSON.stringify(w.properties)})`);
  console.log('contender            req/s    p50 ms   p99 ms   /ping p99 ms  errors');
  for (const [name, s] of Object.entries(summary)) {
    console.log(
      `${name.padEnd(20)} ${fmt(s.throughput).padStart(7)} ${fmt(s.p50).padStart(8)} ${fmt(s.p99).padStart(8)} ${fmt(s.pingP99, 2).padStart(13)} ${String(s.errors).padStart(7)}`,
    );
  }
  const ratio = (a: string, b: string) => summary[a]!.throughput / summary[b]!.throughput;
  console.log(
    `ratio /predictions ÷ in-process: ${ratio('kiln /predictions', 'in-process').toFixed(3)}`,
  );
  console.log(
    `ratio /v2 binary ÷ in-process:   ${ratio('kiln /v2 binary', 'in-process').toFixed(3)}`,
  );
  console.log(
    `ratio /predictions ÷ naive:      ${ratio('kiln /predictions', 'naive koa+ort').toFixed(3)}`,
  );
}
fs.rmSync(root, { recursive: true, force: true });
