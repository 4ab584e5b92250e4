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
    });
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
  const figures = await alternateRounds(
    [
      { name: 'grpc ModelInfer', measure: (round) => measure.grpc(durationOf(round)) },
      { name: 'http v2 binary', measure: (round) => measure.http(durationOf(round)) },
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
