// bench/grpc: the same `kiln serve` process answering ResNet-18 over the v2 gRPC protocol
// (ModelInfer with raw_input_contents) and over HTTP v2 with the binary-data extension.
// Both clients come from one language (Python: grpcio and http.client, in a process of their
// own; or Node: grpc-js and node:http), so that the protocols differ, not the clients. Contenders alternate (A B, B A, …); figures are median
// [min–max] over the rounds, the ratio taken within each round.
//   node -C @kiln/source --import tsx bench/grpc/run.ts [--seconds 8] [--rounds 3] [--concurrency 8]
//     [--client python|node]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { resnetModel } from '@kiln/model-tools';
import { formatSpread, goalLine, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import {
  type Workload,
  buildKilnCli,
  inputTensor,
  startKiln,
  v2BinaryRequest,
} from '../server/contenders.js';
import { runLoad } from '../server/load-generator.js';
import { runGrpcLoad } from './grpc-load.js';
import { generatePythonStubs, pythonGrpcAvailable, runPythonLoad } from './python-load.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '8' },
    port: { type: 'string', default: '18600' },
    client: { type: 'string' },
  },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const concurrency = Number(args.concurrency);
const port = Number(args.port);
const grpcAddress = `127.0.0.1:${port + 5}`;
// Python's grpcio (C-core) and http.client by default: load from another process, through the
// client libraries Triton's and KServe's Python clients are built on; grpc-js and node:http
// (in this process) where Python's grpcio is missing, or with --client node.
const client = args.client ?? (pythonGrpcAvailable() ? 'python' : 'node');
if (client !== 'python' && client !== 'node') throw new Error('--client is python or node');
const stubs = client === 'python' ? generatePythonStubs() : undefined;
const CLASSES = 1000;

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-grpc-'));
const resnet = await resnetModel(path.join(root, 'resnet18'), { depth: 18 });
const workload: Workload = {
  label: 'resnet18',
  modelDir: resnet.dir,
  modelName: 'm',
  inputName: 'input',
  dims: [1, 3, 224, 224],
  concurrency,
  properties: {},
};
buildKilnCli();
const server = await startKiln(workload, port, ['--grpc-address', grpcAddress]);
try {
  const http = v2BinaryRequest(workload);
  const input = inputTensor(workload);
  const grpcRequest = {
    model_name: workload.modelName,
    inputs: [{ name: workload.inputName, datatype: 'FP32', shape: workload.dims }],
    raw_input_contents: [Buffer.from(input.data.buffer)],
  };
  const checkHttp = (body: Buffer) => {
    if (body.byteLength < CLASSES * 4) throw new Error(`short answer: ${body.byteLength} bytes`);
  };
  const checkGrpc = (response: unknown) => {
    const raw = (response as { raw_output_contents: Buffer[] }).raw_output_contents[0];
    if (raw?.byteLength !== CLASSES * 4) throw new Error(`answer of ${raw?.byteLength} bytes`);
  };
  const python = (mode: 'grpc' | 'http', durationMs: number) =>
    runPythonLoad({
      mode,
      target: mode === 'grpc' ? grpcAddress : `127.0.0.1:${port}`,
      concurrency,
      durationMs,
      stubs: stubs!,
      input: Buffer.from(input.data.buffer),
      onClientCpu: (cpuSeconds, requests) => (clientCpu.last = { cpuSeconds, requests }),
    });
  /** The Python client's CPU in the pass that ran last. */
  const clientCpu: { last?: { cpuSeconds: number; requests: number } | undefined } = {};
  const node = {
    http: async (durationMs: number) => {
      const result = await runLoad({
        url: `${server.url}/v2/models/${workload.modelName}/infer`,
        body: http.body,
        headers: http.headers,
        concurrency,
        durationMs,
        check: checkHttp,
      });
      if (result.errors > 0) throw new Error(`HTTP: ${result.errors} failed requests`);
      return result.throughput;
    },
    grpc: async (durationMs: number) => {
      const result = await runGrpcLoad({
        address: grpcAddress,
        request: grpcRequest,
        concurrency,
        durationMs,
        check: checkGrpc,
      });
      if (result.errors > 0) throw new Error(`gRPC: ${result.errors} failed calls`);
      return result.throughput;
    },
  };
  const measure =
    client === 'python'
      ? { http: (ms: number) => python('http', ms), grpc: (ms: number) => python('grpc', ms) }
      : node;
  const durationOf = (round: number) => (round < 0 ? 2000 : seconds * 1000);
  // The server's CPU a request, each protocol's rounds together: its main thread (where each
  // protocol's own work runs) and the whole process (inference included).
  // The Python client's too: it shares the machine's cores with the server.
  const cpu = {
    grpc: { main: 0, all: 0, requests: 0, client: 0, clientRequests: 0 },
    http: { main: 0, all: 0, requests: 0, client: 0, clientRequests: 0 },
  };
  const timed = async (kind: 'grpc' | 'http', round: number) => {
    const before = serverCpu(server.pid);
    const throughput = await measure[kind](durationOf(round));
    const after = serverCpu(server.pid);
    if (round >= 0 && before && after) {
      cpu[kind].main += after.mainNs - before.mainNs;
      cpu[kind].all += after.processNs - before.processNs;
      cpu[kind].requests += throughput * seconds;
    }
    const client = clientCpu.last;
    clientCpu.last = undefined;
    if (round >= 0 && client) {
      cpu[kind].client += client.cpuSeconds * 1e9;
      cpu[kind].clientRequests += client.requests;
    }
    return throughput;
  };
  const figures = await alternateRounds(
    [
      { name: 'grpc ModelInfer', measure: (round) => timed('grpc', round) },
      { name: 'http v2 binary', measure: (round) => timed('http', round) },
    ],
    { rounds, warmupRounds: 1 },
  );
  console.log(
    `bench/grpc: ResNet-18 (1×3×224×224 FP32), one kiln serve with default settings, ${client} clients, concurrency ${concurrency}, ${seconds} s per round, ${rounds} rounds; ${machineLine()}`,
  );
  for (const [name, values] of Object.entries(figures))
    console.log(`  ${name.padEnd(16)} ${formatSpread(spreadOf(values)).padStart(24)} req/s`);
  console.log(
    `  ${goalLine('grpc ÷ http', ratioSpread(figures['grpc ModelInfer']!, figures['http v2 binary']!), { atLeast: 1 })}`,
  );
  console.log(`  server-side mean time per request: ${await serverSideMeans(port + 2)}`);
  if (cpu.grpc.requests > 0 && cpu.http.requests > 0) {
    const per = (kind: 'grpc' | 'http', what: 'main' | 'all') =>
      (cpu[kind][what] / 1e3 / cpu[kind].requests).toFixed(0);
    console.log(
      `  server CPU a request, µs: main thread grpc ${per('grpc', 'main')}, http ${per('http', 'main')}; whole process grpc ${per('grpc', 'all')}, http ${per('http', 'all')}`,
    );
  }
  if (cpu.grpc.clientRequests > 0 && cpu.http.clientRequests > 0) {
    const client = (kind: 'grpc' | 'http') =>
      (cpu[kind].client / 1e3 / cpu[kind].clientRequests).toFixed(0);
    console.log(
      `  Python client's CPU a request (all its threads), µs: grpcio ${client('grpc')}, http.client ${client('http')}`,
    );
  }
  console.log(`end: ${machineLine()}`);
} finally {
  await server.stop();
  fs.rmSync(root, { recursive: true, force: true });
  if (stubs) fs.rmSync(stubs, { recursive: true, force: true });
}

/** Mean of kiln_request_duration_seconds per API, from the server's /metrics. */
async function serverSideMeans(metricsPort: number): Promise<string> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const total = (api: string, what: 'sum' | 'count') =>
    Number(
      new RegExp(
        `kiln_request_duration_seconds_${what}\\{api="${api}"[^}]*model="m"\\} ([\\d.e+-]+)`,
      ).exec(text)?.[1],
    );
  return ['grpc', 'inference']
    .map(
      (api) =>
        `${api === 'grpc' ? 'grpc' : 'http'} ${((total(api, 'sum') / total(api, 'count')) * 1000).toFixed(1)} ms`,
    )
    .join(', ');
}

/**
 * The server's CPU time so far: its main thread's (/proc/…/task/<pid>/schedstat) and the whole
 * process's (utime + stime in /proc/<pid>/stat), ns; undefined off Linux or without a pid.
 */
function serverCpu(pid: number | undefined): { mainNs: number; processNs: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    const mainNs = Number(
      fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0],
    );
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return { mainNs, processNs: (ticks * 1e9) / 100 };
  } catch {
    return undefined;
  }
}
