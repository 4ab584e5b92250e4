/**
 * Core pinning as served models get it (serving.properties `cpu_pinning`, what
 * config.properties' `cpu_launcher_enable` sets for every model), over HTTP: the same model
 * registered twice in one server — `cpu_pinning=true` (each worker on physical cores of its
 * own, its intra-op threads one per core) and `cpu_pinning=false` (the pool's thread budget,
 * threads wherever the OS puts them) — with the same number of workers, loaded by the same
 * closed-loop clients. Contenders alternate over the rounds; prints req/s and p50 latency per
 * contender, the ratio from the same rounds, each pinned worker's cores and the load average.
 *
 *   node -C @kiln/source --import tsx bench/tuning/pinning.ts [--workers 2] [--engine onnx]
 *     [--requests 120] [--concurrency 2×workers] [--rounds 3] [--depth 18] [--model DIR]
 *
 * --engine onnx: ResNet (--depth 18 or 50, random weights) written by @kiln/model-tools;
 * --engine torch: a TorchScript conv net (written without Python) on LibTorch; --model DIR:
 * any model folder (its serving.properties kept, the pool lines added), fed zeros shaped as
 * its first input declares (dynamic sizes: --shape, e.g. 1,3,224,224). On a many-core machine
 * give --workers (and --concurrency); every figure also prints as a `figure:` line.
 */
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import http from 'node:http';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NDList, Tensor, encodeNpz } from '@kiln/core';
import { resnetModel } from '@kiln/model-tools';
import {
  formatSpread,
  goalLine,
  machineLine,
  median,
  ratioSpread,
  spreadOf,
} from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import { startBenchServer } from './bench-server.js';

const { values: args } = parseArgs({
  options: {
    engine: { type: 'string', default: 'onnx' },
    model: { type: 'string' },
    shape: { type: 'string' },
    workers: { type: 'string', default: '2' },
    requests: { type: 'string', default: '120' },
    concurrency: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    depth: { type: 'string', default: '18' },
    batch: { type: 'string', default: '1' },
  },
});
const int = (name: keyof typeof args, fallback?: number) => {
  const value = args[name] === undefined ? fallback : Number(args[name]);
  if (value === undefined || !Number.isSafeInteger(value) || value < 1)
    throw new Error(`--${name} must be an integer ≥ 1`);
  return value;
};

/** TorchServe's CPU guide reports large gains from pinning on many-core, multi-socket hosts. */
const GOAL = { atLeast: 1.1 };

/** A model folder for the chosen engine, and the input shape to send. */
async function modelFolder(into: string): Promise<{ dir: string; shape: number[] | undefined }> {
  const shape = args.shape?.split(',').map(Number);
  if (args.model) return { dir: args.model, shape };
  if (args.engine === 'onnx') {
    const depth = int('depth');
    if (depth !== 18 && depth !== 50) throw new Error('--depth must be 18 or 50');
    const cache = join(tmpdir(), 'kiln-bench-tuning', `resnet${depth}`);
    if (!existsSync(join(cache, 'model.onnx'))) await resnetModel(cache, { depth, classes: 1000 });
    return { dir: cache, shape: shape ?? [1, 3, 224, 224] };
  }
  if (args.engine === 'torch') {
    const { saveScriptModule } = await import('@kiln/engine-libtorch');
    const dir = join(into, 'convnet');
    mkdirSync(dir, { recursive: true });
    const weight = (o: number, i: number) =>
      new Tensor(
        'float32',
        Float32Array.from({ length: o * i * 9 }, (_, k) => Math.sin(k) * 0.05),
        [o, i, 3, 3],
      );
    // Six 3×3 convolutions at 64 channels on 112×112: convolution-bound, like ResNet's body.
    await saveScriptModule(join(dir, 'model.pt'), {
      source: `
def forward(self, x: Tensor) -> Tensor:
    y = torch.relu(torch.conv2d(x, self.w0, None, [2, 2], [1, 1]))
    y = torch.relu(torch.conv2d(y, self.w1, None, [1, 1], [1, 1]))
    y = torch.relu(torch.conv2d(y, self.w2, None, [1, 1], [1, 1]))
    y = torch.relu(torch.conv2d(y, self.w3, None, [1, 1], [1, 1]))
    y = torch.relu(torch.conv2d(y, self.w4, None, [1, 1], [1, 1]))
    y = torch.relu(torch.conv2d(y, self.w5, None, [1, 1], [1, 1]))
    return torch.mean(y, [2, 3])
`,
      parameters: {
        w0: weight(64, 3),
        w1: weight(64, 64),
        w2: weight(64, 64),
        w3: weight(64, 64),
        w4: weight(64, 64),
        w5: weight(64, 64),
      },
    });
    writeFileSync(join(dir, 'serving.properties'), 'engine=PyTorch\n');
    return { dir, shape: shape ?? [1, 3, 224, 224] };
  }
  throw new Error(`--engine must be onnx or torch (or give --model), not ${args.engine}`);
}

/** POSTs one .npz body; resolves with the milliseconds it took. */
function predict(agent: http.Agent, url: URL, body: Buffer): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: { 'content-length': body.byteLength },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (c: Buffer) => chunks.push(c));
        response.on('end', () => {
          if (response.statusCode !== 200)
            return reject(new Error(`${response.statusCode}: ${Buffer.concat(chunks).toString()}`));
          resolve(performance.now() - started);
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** `requests` requests through `concurrency` closed-loop clients: req/s and p50 ms. */
async function serve(
  url: URL,
  body: Buffer,
  requests: number,
  concurrency: number,
): Promise<{ throughput: number; p50: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  let sent = 0;
  const started = performance.now();
  const client = async () => {
    while (sent < requests) {
      sent++;
      latencies.push(await predict(agent, url, body));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { throughput: requests / seconds, p50: median(latencies) };
}

async function main(): Promise<void> {
  const workers = int('workers');
  const concurrency = int('concurrency', 2 * workers);
  const requests = int('requests');
  const scratch = mkdtempSync(join(tmpdir(), 'kiln-pinning-'));
  const { dir, shape } = await modelFolder(scratch);
  const pool = [
    `batch_size=${int('batch')}`,
    'max_batch_delay=0',
    `minWorkers=${workers}`,
    `maxWorkers=${workers}`,
    'placement=thread',
  ];
  const contenders = { pinned: 'cpu_pinning=true', unpinned: 'cpu_pinning=false' } as const;
  for (const [name, line] of Object.entries(contenders)) {
    cpSync(dir, join(scratch, name), { recursive: true });
    const properties = join(scratch, name, 'serving.properties');
    const kept = existsSync(properties) ? readFileSync(properties, 'utf8') : '';
    writeFileSync(properties, `${kept}\n${[...pool, line].join('\n')}\n`);
  }
  const server = await startBenchServer(
    Object.keys(contenders).map((name) => `${name}=${join(scratch, name)}`),
  );
  try {
    for (let i = 0; i < 1200 && server.models.list().some((e) => e.state === 'PENDING'); i++)
      await new Promise((r) => setTimeout(r, 100));
    const entries = server.models.list();
    for (const entry of entries)
      if (entry.state !== 'READY') throw new Error(`model ${entry.name}: ${entry.error}`);
    const input = entries[0]!.signature?.inputs[0];
    const dims = shape ?? input?.shape?.map((d) => (d < 0 ? 1 : d));
    if (!dims) throw new Error('the model does not declare its input shape: give --shape');
    const size = dims.reduce((a, b) => a * b, 1);
    const body = Buffer.from(
      encodeNpz(
        NDList.of(
          new Tensor(
            'float32',
            Float32Array.from({ length: size }, (_, i) => Math.sin(i)),
            dims,
            input?.name ?? 'x',
          ),
        ),
      ),
    );
    const urlOf = (name: string) => new URL(`${server.urls.inference}/predictions/${name}`);
    const setting =
      `${args.model ?? (args.engine === 'onnx' ? `ResNet-${args.depth} ONNX` : 'TorchScript conv net')}, ` +
      `input [${dims}], ${workers} workers each, ${concurrency} closed-loop HTTP clients, ` +
      `${requests} requests a round, ${args.rounds} rounds alternating`;
    console.log(machineLine());
    console.log(setting);
    for (const entry of entries) {
      const described = entry.pool!.describe().workerGroups.flatMap((g) => g.workers);
      console.log(
        `${entry.name}: ` +
          described
            .map(
              (w) =>
                `worker ${w.id} cores ${w.pinnedCores ? `[${w.pinnedCores}]` : `any (${w.pinError ?? 'not pinned'})`}, ` +
                `${w.intraOpThreads ?? 'user'} threads`,
            )
            .join('; '),
      );
    }
    // Warm-up: every worker of each runs a few times.
    for (const name of Object.keys(contenders))
      await serve(urlOf(name), body, 4 * workers, concurrency);

    const p50: Record<string, number[]> = { pinned: [], unpinned: [] };
    const figures = await alternateRounds(
      Object.keys(contenders).map((name) => ({
        name,
        measure: async () => {
          const result = await serve(urlOf(name), body, requests, concurrency);
          p50[name]!.push(result.p50);
          return result.throughput;
        },
      })),
      { rounds: int('rounds') },
    );
    for (const name of Object.keys(contenders)) {
      console.log(
        `${name.padEnd(8)} ${formatSpread(spreadOf(figures[name]!))} req/s, ` +
          `p50 ${formatSpread(spreadOf(p50[name]!))} ms`,
      );
    }
    const ratio = ratioSpread(figures.pinned!, figures.unpinned!);
    console.log(goalLine('pinned ÷ unpinned (req/s)', ratio, GOAL));
    console.log(
      `figure: pinned ÷ unpinned req/s (${setting}, ${os.availableParallelism()} cores): ` +
        `${formatSpread(ratio, 2)}×`,
    );
    console.log(machineLine());
  } finally {
    await server.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

await main();
