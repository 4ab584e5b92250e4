/**
 * Warm-up's effect on the first requests a model answers: ResNet-18 on ONNX Runtime, served
 * over HTTP, loaded fresh for every measurement — once with the default warm-up (each worker
 * runs batch 1 and the batch size before the model is READY) and once with
 * `warmup_batch_sizes=none` — then sent `--first` requests one after another as soon as it is
 * READY, and `--steady` more. Contenders alternate over the rounds; prints the first request's
 * latency, the mean of the next ones, the steady-state median and the time to READY per
 * contender, the ratios from the same rounds, and the load average.
 *
 *   node -C @kiln/source --import tsx bench/tuning/warmup.ts [--rounds 3] [--first 5] …
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Tensor, encodeNpy } from '@kiln/core';
import { MODEL_FILE, resnetModel } from '@kiln/model-tools';
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
    rounds: { type: 'string', default: '3' },
    first: { type: 'string', default: '5' },
    steady: { type: 'string', default: '20' },
  },
});
const int = (name: keyof typeof args) => {
  const value = Number(args[name]);
  if (!Number.isSafeInteger(value) || value < 1)
    throw new Error(`--${name} must be an integer ≥ 1`);
  return value;
};

/** The first request with warm-up should take at most half of what it takes without. */
const GOAL = { atLeast: 2 };

const CONTENDERS = {
  warm: '',
  cold: 'warmup_batch_sizes=none\n',
} as const;
type Contender = keyof typeof CONTENDERS;

interface Run {
  readonly readyMs: number;
  /** Latency of each of the first requests, ms, in order. */
  readonly first: number[];
  readonly steadyMs: number;
}

async function post(url: string, body: Uint8Array): Promise<number> {
  const started = performance.now();
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-npy' },
    body,
  });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`${url}: HTTP ${response.status}`);
  return performance.now() - started;
}

/** Loads the model in a fresh server, as `contender` says, and times its first requests. */
async function measure(store: string, contender: Contender, round: number): Promise<Run> {
  const name = `${contender}${round + 10}`;
  const dir = join(store, name);
  mkdirSync(dir);
  copyFileSync(join(store, 'model', MODEL_FILE), join(dir, MODEL_FILE));
  writeFileSync(
    join(dir, 'serving.properties'),
    `engine=OnnxRuntime\nminWorkers=1\nmaxWorkers=1\n${CONTENDERS[contender]}`,
  );
  const started = performance.now();
  const server = await startBenchServer([`${name}=${dir}`]);
  try {
    for (let i = 0; i < 200 && server.models.list().length === 0; i++)
      await new Promise((r) => setTimeout(r, 10));
    await Promise.all(server.models.list().map((e) => e.loading));
    const [entry] = server.models.list();
    if (entry?.state !== 'READY') throw new Error(`model ${name}: ${entry?.error}`);
    const readyMs = performance.now() - started;
    const url = `${server.urls.inference}/predictions/${name}`;
    const body = encodeNpy(
      new Tensor('float32', new Float32Array(3 * 224 * 224).fill(0.5), [1, 3, 224, 224]),
    );
    const first: number[] = [];
    for (let i = 0; i < int('first'); i++) first.push(await post(url, body));
    const steady: number[] = [];
    for (let i = 0; i < int('steady'); i++) steady.push(await post(url, body));
    return { readyMs, first, steadyMs: median(steady) };
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const store = mkdtempSync(join(tmpdir(), 'kiln-bench-warmup-'));
  try {
    await resnetModel(join(store, 'model'), { depth: 18 });
    console.log(machineLine());
    console.log(
      `ResNet-18 (ONNX Runtime), a fresh server and model per measurement, 1 worker, ` +
        `adaptive batching (warm-up at batch 1 and 32); ${args.first} requests one after another ` +
        `once READY, then ${args.steady} more; ${args.rounds} rounds alternating (1 unrecorded first)`,
    );
    const runs: Record<Contender, Run[]> = { warm: [], cold: [] };
    const figures = await alternateRounds(
      (Object.keys(CONTENDERS) as Contender[]).map((contender) => ({
        name: contender,
        measure: async (round) => {
          const run = await measure(store, contender, round);
          if (round >= 0) runs[contender].push(run);
          return run.first[0]!;
        },
      })),
      { rounds: int('rounds'), warmupRounds: 1 },
    );
    for (const contender of Object.keys(CONTENDERS) as Contender[]) {
      const seen = runs[contender];
      const next = seen.map(
        (r) => r.first.slice(1).reduce((a, b) => a + b, 0) / (r.first.length - 1),
      );
      console.log(
        `${contender.padEnd(5)} first request ${formatSpread(spreadOf(figures[contender]!))} ms; ` +
          `requests 2–${args.first} ${formatSpread(spreadOf(next))} ms; ` +
          `steady ${formatSpread(spreadOf(seen.map((r) => r.steadyMs)))} ms; ` +
          `READY after ${formatSpread(spreadOf(seen.map((r) => r.readyMs)), 0)} ms`,
      );
      console.log(
        `      each first request, by round: ${seen.map((r) => r.first.map((ms) => ms.toFixed(1)).join(' ')).join(' | ')}`,
      );
    }
    console.log(
      goalLine('first request, cold ÷ warm', ratioSpread(figures.cold!, figures.warm!), GOAL),
    );
    console.log(machineLine());
  } finally {
    rmSync(store, { recursive: true, force: true });
  }
}

await main();
