/**
 * Python mode against the server a Python user would write: FastAPI + uvicorn. Both call the
 * same function (resnet_common.predict: np.load of the body, torch ResNet-18 forward, top-5 as
 * JSON) on the same random-weight ResNet-18 made here with torchvision, in Python processes with
 * the same environment (pythonEnv: torch threads cores ÷ workers, OpenMP's spin count), under
 * the same wrk load (npy body, 602 kB). Kiln runs as `kiln serve` in a process of its own, as
 * installed (built JS, the bin's Node flags), with N Python workers behind one port. uvicorn
 * runs N single-worker processes, each on its own port and loaded by a wrk of its own with an
 * equal share of the connections: `--workers N` on one socket let whichever worker woke first
 * accept all of wrk's few connections (4:0 in some passes). Rounds alternate; ratios are taken
 * within each round.
 *
 *   node -C @kiln/source --import tsx bench/python-mode/throughput.ts [--seconds 6] [--rounds 3] [--workers 1,2] [--concurrency-per-worker 2]
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Tensor, encodeNpy } from '@kiln/core';
import { goalLine, machineLine, ratioSpread, formatSpread, spreadOf } from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import { runLoad, type LoadResult } from '../server/load-generator.js';
import { runWrk, wrkAvailable } from '../server/wrk-load.js';
import { buildKilnCli, startKilnServe } from '../server/contenders.js';
import { perCallSplit } from './per-call-split.js';

/** Kiln's Python workers' OpenMP spin count by default (engine-python's OPENMP_SPIN_COUNT). */
const OPENMP_SPIN_COUNT = '10000';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '6' },
    rounds: { type: 'string', default: '3' },
    workers: { type: 'string', default: '1,2' },
    /** Connections per worker (default 2: one request running, one waiting). */
    'concurrency-per-worker': { type: 'string', default: '2' },
  },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const PYTHON = '/usr/bin/python3';
const cores = os.availableParallelism();

const COMMON = `
import io, os
import numpy as np
import torch

torch.set_num_threads(int(os.environ.get("BENCH_TORCH_THREADS", "1")))
_model = None

def model():
    global _model
    if _model is None:
        import torchvision
        net = torchvision.models.resnet18(weights=None)
        net.load_state_dict(torch.load(os.path.join(os.path.dirname(__file__), "resnet18.pth")))
        net.eval()
        _model = net
    return _model

def predict(body: bytes):
    x = torch.from_numpy(np.load(io.BytesIO(body), allow_pickle=False))
    with torch.inference_mode():
        p = torch.softmax(model()(x), dim=1)[0]
    top = torch.topk(p, 5)
    return [{"index": int(i), "probability": float(v)} for v, i in zip(top.values, top.indices)]
`;

const HANDLER = `
from djl_python import Input, Output
import resnet_common

def handle(inputs: Input):
    resnet_common.model()
    if inputs.is_empty():
        return None
    return Output().add_as_json(resnet_common.predict(inputs.get_as_bytes()))
`;

const FASTAPI = `
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
import resnet_common

app = FastAPI()
resnet_common.model()

@app.post("/predictions/resnet")
async def predictions(request: Request):
    # A plain def would run in a thread pool; the usual async endpoint runs on the loop.
    return JSONResponse(resnet_common.predict(await request.body()))
`;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-python-throughput-'));
fs.writeFileSync(path.join(dir, 'resnet_common.py'), COMMON);
fs.writeFileSync(path.join(dir, 'model.py'), HANDLER);
fs.writeFileSync(path.join(dir, 'fastapi_app.py'), FASTAPI);
execFileSync(PYTHON, [
  '-c',
  `import torch, torchvision; torch.manual_seed(0); torch.save(torchvision.models.resnet18(weights=None).state_dict(), ${JSON.stringify(path.join(dir, 'resnet18.pth'))})`,
]);

const body = Buffer.from(
  encodeNpy(new Tensor('float32', new Float32Array(3 * 224 * 224).fill(0.5), [1, 3, 224, 224])),
);

/**
 * The environment both servers' Python processes get: torch's, OpenMP's, MKL's and OpenBLAS's
 * threads, and how long idle OpenMP threads spin. Kiln keeps a GOMP_SPINCOUNT it is given, so
 * uvicorn's workers wait exactly as Kiln's do.
 */
function pythonEnv(threads: number): Record<string, string> {
  const n = String(threads);
  return {
    BENCH_TORCH_THREADS: n,
    OMP_NUM_THREADS: n,
    MKL_NUM_THREADS: n,
    OPENBLAS_NUM_THREADS: n,
    GOMP_SPINCOUNT: OPENMP_SPIN_COUNT,
  };
}

interface Running {
  /** Where to send load; the connections are shared equally between them. */
  readonly urls: readonly string[];
  /** Where Kiln's calls spent their time (Kiln only). */
  split?(): Promise<string>;
  stop(): Promise<void>;
}

/** `kiln serve` in a child process, as installed (built JS, the bin's Node flags). */
async function startKiln(workers: number, threads: number, port: number): Promise<Running> {
  fs.writeFileSync(
    path.join(dir, 'serving.properties'),
    `engine=Python\noption.pythonExecutable=${PYTHON}\nminWorkers=${workers}\nmaxWorkers=${workers}\nbatch_size=1\n`,
  );
  const server = await startKilnServe('resnet', dir, port, [], pythonEnv(threads));
  return {
    urls: [server.url],
    stop: server.stop,
    split: () => perCallSplit(`http://127.0.0.1:${port + 2}`, 'resnet'),
  };
}

/** One single-worker uvicorn per port from `port` on. */
async function startUvicorn(workers: number, threads: number, port: number): Promise<Running> {
  const servers = await Promise.all(
    Array.from({ length: workers }, (_, i) => startOneUvicorn(threads, port + i)),
  );
  return {
    urls: servers.map((s) => s.url),
    stop: async () => {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
}

async function startOneUvicorn(
  threads: number,
  port: number,
): Promise<{ url: string; stop(): Promise<void> }> {
  const child: ChildProcess = spawn(
    PYTHON,
    [
      '-m',
      'uvicorn',
      'fastapi_app:app',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--workers',
      '1',
      '--log-level',
      'warning',
      '--no-access-log',
    ],
    { cwd: dir, env: { ...process.env, ...pythonEnv(threads) }, stdio: 'ignore' },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const ok = await fetch(`${url}/predictions/resnet`, { method: 'POST', body }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (i > 600 || child.exitCode !== null) throw new Error('uvicorn did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** One closed-loop load per URL at the same time, the connections split equally. */
async function load(server: Running, concurrency: number): Promise<LoadResult[]> {
  const each = Math.max(1, Math.round(concurrency / server.urls.length));
  return Promise.all(
    server.urls.map((url) => {
      const options = {
        url: `${url}/predictions/resnet`,
        body,
        headers: { 'content-type': 'tensor/npy' },
        concurrency: each,
        durationMs: seconds * 1000,
      };
      return wrkAvailable() ? runWrk(options) : runLoad(options);
    }),
  );
}

/** Requests answered per URL over the measured passes, and errors; the sum's throughput. */
function tally(results: LoadResult[], perUrl: number[], errors: { count: number }): number {
  results.forEach((r, i) => (perUrl[i] = (perUrl[i] ?? 0) + r.requests - r.errors));
  errors.count += results.reduce((sum, r) => sum + r.errors, 0);
  return results.reduce((sum, r) => sum + r.throughput, 0);
}

buildKilnCli();
console.log(machineLine());
console.log(
  `client: ${wrkAvailable() ? 'wrk (one thread)' : 'Node http'}; body: npy float32 [1,3,224,224] (${body.length} B); ${seconds} s per round, ${rounds} rounds + 1 warm-up`,
);
const goals: Record<number, number> = { 1: 1.0, 2: 1.3 };
let port = 18_500 + Math.floor(Math.random() * 1000);
for (const workers of args.workers.split(',').map(Number)) {
  const threads = Math.max(1, Math.floor(cores / workers));
  const concurrency = Number(args['concurrency-per-worker']) * workers;
  const kiln = await startKiln(workers, threads, (port += 7));
  const uvicorn = await startUvicorn(workers, threads, (port += 7));
  const errors = { kiln: { count: 0 }, fastapi: { count: 0 } };
  const perWorker = { kiln: [] as number[], fastapi: [] as number[] };
  try {
    const figures = await alternateRounds(
      [
        {
          name: 'kiln',
          measure: async () => tally(await load(kiln, concurrency), perWorker.kiln, errors.kiln),
        },
        {
          name: 'fastapi',
          measure: async () =>
            tally(await load(uvicorn, concurrency), perWorker.fastapi, errors.fastapi),
        },
      ],
      { rounds, warmupRounds: 1 },
    );
    console.log(
      `\n${workers} worker(s), torch threads ${threads} each, concurrency ${concurrency}: Kiln ${formatSpread(spreadOf(figures.kiln!))} req/s, FastAPI+uvicorn ${formatSpread(spreadOf(figures.fastapi!))} req/s; errors ${errors.kiln.count} / ${errors.fastapi.count}`,
    );
    // Each uvicorn worker had its own connections: both must have answered their share.
    console.log(`uvicorn requests per worker: ${perWorker.fastapi.join(' / ')}`);
    console.log(
      goalLine(
        `Kiln ÷ FastAPI, ${workers} worker(s)`,
        ratioSpread(figures.kiln!, figures.fastapi!),
        { atLeast: goals[workers] ?? 1 },
      ),
    );
    console.log(await kiln.split!());
    console.log(machineLine());
  } finally {
    await kiln.stop();
    await uvicorn.stop();
  }
}
fs.rmSync(dir, { recursive: true, force: true });
