// Scale-out on one machine: two `kiln serve` replicas behind Debian's haproxy (HTTP/1.1 and
// h2c gRPC, health-checked on /v2/health/ready), ResNet-18 (1×3×224×224 FP32).
// 1. Throughput through the proxy with 2 replicas against 1, alternating over the rounds.
// 2. Replica loss: HTTP and gRPC clients load both replicas; one is stopped mid-run (SIGTERM:
//    it drains; SIGKILL: its requests in flight die and the clients retry). Every request must
//    end with the right answer, or with an error its caller sees — none lost silently.
//   node -C @kiln/source --import tsx deploy/scale-out/run.ts [--seconds 8] [--rounds 3] [--concurrency 8]
//     [--kill-seconds 12] [--port 18700]
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { resnetModel } from '@kiln/model-tools';
import { type Outcome, emptyOutcome, grpcInferClient, httpInfer } from './clients.js';
import { type Replica, haproxyConfig, startHaproxy } from './haproxy.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '8' },
    'kill-seconds': { type: 'string', default: '12' },
    port: { type: 'string', default: '18700' },
  },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const concurrency = Number(args.concurrency);
const killSeconds = Number(args['kill-seconds']);
const base = Number(args.port);
const KILN = fileURLToPath(new URL('../../apps/cli/bin/kiln.mjs', import.meta.url));

const loadLine = () =>
  `load average ${os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' / ')} (1/5/15 min), ${os.availableParallelism()} cores`;

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-scale-out-'));
const model = await resnetModel(path.join(root, 'resnet18'), { depth: 18 });
const replicas: Replica[] = [
  { name: 'a', httpPort: base, grpcPort: base + 1 },
  { name: 'b', httpPort: base + 10, grpcPort: base + 11 },
];
const ports = { http: base + 80, grpc: base + 81, httpOne: base + 82, grpcOne: base + 83 };

/** `kiln serve` as the container runs it, on its own ports. */
async function startReplica(r: Replica): Promise<ChildProcess> {
  const child = spawn(
    KILN,
    [
      'serve',
      `--model_dir=${model.dir}`,
      '--model_name=m',
      '--inference-address',
      `http://127.0.0.1:${r.httpPort}`,
      '--grpc-address',
      `127.0.0.1:${r.grpcPort}`,
      '--management-address',
      `http://127.0.0.1:${r.httpPort + 2}`,
      '--metrics-address',
      `http://127.0.0.1:${r.httpPort + 3}`,
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, KILN_ENABLE_ACCESS_LOG: 'false' },
    },
  );
  await new Promise<void>((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (/READY/.test(output)) resolve();
      if (/FAILED|error/i.test(output)) reject(new Error(output));
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`replica ${r.name} exited ${code}: ${output}`)));
  });
  return child;
}

const input = Buffer.from(
  new Float32Array(Array.from({ length: 3 * 224 * 224 }, (_, i) => ((i * 7919) % 255) / 255))
    .buffer,
);
const header = Buffer.from(
  JSON.stringify({
    inputs: [
      {
        name: 'input',
        shape: [1, 3, 224, 224],
        datatype: 'FP32',
        parameters: { binary_data_size: input.length },
      },
    ],
    parameters: { binary_data_output: true },
  }),
);
const httpBody = Buffer.concat([header, input]);
const grpcRequest = {
  model_name: 'm',
  inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 3, 224, 224] }],
  raw_input_contents: [input],
};

/** Closed loop: `clients` callers, each sending its next request when answered. */
async function closedLoop(
  clients: number,
  durationMs: number,
  one: () => Promise<void>,
): Promise<number> {
  let done = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() - started < durationMs) {
        await one();
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

const children = new Map<string, ChildProcess>();
let proxy: ChildProcess | undefined;
try {
  for (const r of replicas) children.set(r.name, await startReplica(r));
  proxy = await startHaproxy(root, haproxyConfig(replicas, ports));
  const reference = await fetch(`http://127.0.0.1:${ports.http}/v2/models/m/infer`, {
    method: 'POST',
    body: httpBody,
    headers: { 'inference-header-content-length': String(header.length) },
  });
  const referenceBytes = Buffer.from(await reference.arrayBuffer());
  const expected = referenceBytes.subarray(
    Number(reference.headers.get('inference-header-content-length')),
  );
  if (reference.status !== 200 || expected.length !== 4000)
    throw new Error(`reference answer: ${reference.status}`);

  // 1. Two replicas against one, through the same proxy, alternating.
  const figures: Record<string, number[]> = { '2 replicas': [], '1 replica': [] };
  for (let round = -1; round < rounds; round++) {
    const order = round % 2 === 0 ? ['2 replicas', '1 replica'] : ['1 replica', '2 replicas'];
    for (const name of order) {
      const port = name === '2 replicas' ? ports.http : ports.httpOne;
      const outcome = emptyOutcome();
      const rate = await closedLoop(concurrency, round < 0 ? 2000 : seconds * 1000, () =>
        httpInfer(
          `http://127.0.0.1:${port}/v2/models/m/infer`,
          httpBody,
          header.length,
          expected,
          outcome,
        ),
      );
      if (outcome.failed + outcome.wrong > 0)
        throw new Error(`${name}: ${JSON.stringify(outcome)}`);
      if (round >= 0) figures[name]!.push(rate);
    }
  }
  const spread = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return `${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} [${sorted[0]!.toFixed(1)}–${sorted.at(-1)!.toFixed(1)}]`;
  };
  console.log(
    `scale-out: ResNet-18 via haproxy, HTTP v2 binary, concurrency ${concurrency}, ${seconds} s × ${rounds} rounds; ${loadLine()}`,
  );
  for (const [name, values] of Object.entries(figures))
    console.log(`  ${name.padEnd(11)} ${spread(values).padStart(22)} req/s`);
  console.log(
    `  2 ÷ 1: ${spread(figures['2 replicas']!.map((v, i) => v / figures['1 replica']![i]!))}×`,
  );

  // 2. Losing a replica mid-run, once drained (SIGTERM) and once killed (SIGKILL).
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    const http = emptyOutcome();
    const grpcOutcome = emptyOutcome();
    const grpc = grpcInferClient(`127.0.0.1:${ports.grpc}`);
    const victim = children.get('b')!;
    const exited = new Promise((resolve) => victim.once('exit', resolve));
    const killer = setTimeout(() => victim.kill(signal), (killSeconds * 1000) / 3);
    const half = Math.max(1, concurrency / 2);
    await Promise.all([
      closedLoop(half, killSeconds * 1000, () =>
        httpInfer(
          `http://127.0.0.1:${ports.http}/v2/models/m/infer`,
          httpBody,
          header.length,
          expected,
          http,
        ),
      ),
      closedLoop(half, killSeconds * 1000, () => grpc.infer(grpcRequest, expected, grpcOutcome)),
    ]);
    clearTimeout(killer);
    await exited;
    grpc.close();
    const line = (name: string, o: Outcome) =>
      `  ${name}: ${o.ok + o.okAfterRetry} right answers (${o.okAfterRetry} after a client retry), ${o.wrong} wrong, ${o.failed} failed${o.errors.length ? ` (${[...new Set(o.errors)].join('; ')})` : ''}`;
    console.log(
      `replica b stopped with ${signal} ${(killSeconds / 3).toFixed(1)} s into a ${killSeconds} s run (${half} HTTP + ${half} gRPC clients); ${loadLine()}`,
    );
    console.log(line('HTTP', http));
    console.log(line('gRPC', grpcOutcome));
    const lost = http.wrong + grpcOutcome.wrong;
    console.log(
      `  ${lost === 0 ? 'no request lost silently' : `${lost} WRONG ANSWERS`}; ${http.failed + grpcOutcome.failed} requests failed visibly`,
    );
    if (signal === 'SIGTERM') children.set('b', await startReplica(replicas[1]!));
    // Let haproxy's health check see the restarted replica before the next pass.
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
} finally {
  proxy?.kill('SIGTERM');
  for (const child of children.values()) if (child.exitCode === null) child.kill('SIGTERM');
  await new Promise((resolve) => setTimeout(resolve, 500));
  fs.rmSync(root, { recursive: true, force: true });
}
