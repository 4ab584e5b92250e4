/**
 * What Python mode costs the server's own process per request: the call's frame (each request's
 * properties and contents) and the answer's decoding, measured as Node's CPU time (all its
 * threads, `process.cpuUsage`) and wall time per request while a serving context calls one real
 * Python worker running bench (c)'s numpy MLP. Batches of 8 npy requests (384 B each)
 * alternate with the same requests one call each; figures are median [min–max] over rounds.
 * No HTTP: bench (c) measures the same path behind the server.
 *
 *   node -C @kiln/source --import tsx bench/python-mode/node-side.ts [--rounds 5] [--requests 4000]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CPU, Tensor, encodeNpy, parseServingProperties, type ServingInput } from '@kiln/core';
import { type PythonModel, createPythonEngine } from '@kiln/engine-python';
import { formatSpread, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import { MLP_HANDLER } from './mlp-handler.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    requests: { type: 'string', default: '4000' },
  },
});
const rounds = Number(args.rounds);
const requests = Number(args.requests);
const PYTHON = '/usr/bin/python3';
const BATCH = 8;

const dir = mkdtempSync(join(tmpdir(), 'kiln-bench-python-node-side-'));
writeFileSync(join(dir, 'model.py'), MLP_HANDLER(256));
const engine = await createPythonEngine({ pythonExecutable: PYTHON }).load();
const model = (await engine.loadModel({
  name: 'mlp',
  modelDir: dir,
  device: CPU,
  options: { pythonExecutable: PYTHON },
  properties: parseServingProperties(''),
})) as PythonModel;
const context = await model.newServingContext();

const body = encodeNpy(
  new Tensor(
    'float32',
    Float32Array.from({ length: 64 }, (_, i) => i / 64),
    [1, 64],
  ),
);
const request = (): ServingInput => ({
  body,
  contentType: 'application/x-npy',
  headers: { accept: 'application/json' },
});

/** Node's CPU µs and wall µs per request, over `requests` requests in calls of `size`. */
async function measure(size: number): Promise<{ cpuUs: number; wallUs: number }> {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  for (let done = 0; done < requests; done += size) {
    const answers = await context.serve(Array.from({ length: size }, request));
    if (answers.some((answer) => !answer.ok)) throw new Error(`a call failed: ${size} requests`);
  }
  const used = process.cpuUsage(cpu);
  return {
    cpuUs: (used.user + used.system) / requests,
    wallUs: Number(process.hrtime.bigint() - start) / 1000 / requests,
  };
}

console.log(machineLine());
const cpu: Record<string, number[]> = { batched: [], single: [] };
const wall = await alternateRounds(
  (['batched', 'single'] as const).map((name) => ({
    name,
    async measure(round: number) {
      const figures = await measure(name === 'batched' ? BATCH : 1);
      if (round >= 0) cpu[name]!.push(figures.cpuUs);
      return figures.wallUs;
    },
  })),
  { rounds, warmupRounds: 1 },
);
for (const name of ['batched', 'single'] as const) {
  const label = name === 'batched' ? `batches of ${BATCH}` : 'one request a call';
  console.log(
    `${label}: Node CPU ${formatSpread(spreadOf(cpu[name]!), 1)} µs a request, wall ${formatSpread(spreadOf(wall[name]!), 1)} µs a request`,
  );
}
console.log(
  `Node CPU a request, batches of ${BATCH} ÷ one a call (same rounds): ${formatSpread(ratioSpread(cpu.batched!, cpu.single!), 2)}`,
);
await context.close();
await model.dispose();
rmSync(dir, { recursive: true, force: true });
console.log(machineLine());
