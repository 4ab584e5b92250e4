/**
 * Per-request cost of Kiln's Python mode: a Kiln execution context (one Python process, framed
 * IPC over pipes) calling handle(inputs) against the same handle called in-process in Python,
 * for a 600 kB float32 tensor and a 100-byte body. Rounds alternate; the overhead is taken
 * within each round (Kiln µs/call − in-process µs/call), median [min–max] over the rounds. A
 * bare echo of the same bytes over the same kind of sockets (bare-echo.ts) runs in the same
 * rounds: the machine's floor for one round trip, and Kiln's own share above it.
 *
 *   node -C @kiln/source --import tsx bench/python-mode/run.ts [--rounds 5] [--calls 300]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CPU, NDList, Tensor, parseServingProperties, type ExecutionContext } from '@kiln/core';
import { PYTHON_PACKAGE_DIR, createPythonEngine } from '@kiln/engine-python';
import { formatSpread, goalLine, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import { startBareEcho, type BareEcho } from './bare-echo.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    calls: { type: 'string', default: '300' },
  },
});
const rounds = Number(args.rounds);
const calls = Number(args.calls);
const PYTHON = '/usr/bin/python3';

const MODEL = `
from djl_python import Input, Output
def handle(inputs: Input):
    if inputs.is_empty():
        return None
    return Output().add_as_numpy([inputs.get_as_numpy()[0]])
`;

const dir = mkdtempSync(join(tmpdir(), 'kiln-bench-python-'));
writeFileSync(join(dir, 'model.py'), MODEL);

/** µs per in-process handle() call on the same kind of Input, timed inside Python. */
function inProcess(kind: 'tensor' | 'small'): number {
  const script = `
import sys, time, numpy as np
sys.path.insert(0, ${JSON.stringify(dir)})
from model import handle
from kiln_python import Input
x = np.zeros((1, 3, 224, 224), np.float32) if ${JSON.stringify(kind)} == 'tensor' else np.zeros((25,), np.float32)
handle(Input(contents=[("x", x)]))
t = time.perf_counter()
for _ in range(${calls}):
    handle(Input(contents=[("x", x)]))
print((time.perf_counter() - t) / ${calls} * 1e6)
`;
  return Number(
    execFileSync(PYTHON, ['-c', script], {
      env: { ...process.env, PYTHONPATH: PYTHON_PACKAGE_DIR },
      encoding: 'utf8',
    }).trim(),
  );
}

async function viaKiln(context: ExecutionContext, input: NDList): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await context.forward(input);
  return Number(process.hrtime.bigint() - start) / 1000 / calls;
}

async function viaBareEcho(echo: BareEcho, payload: Buffer): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await echo.call(payload);
  return Number(process.hrtime.bigint() - start) / 1000 / calls;
}

console.log(machineLine());
const bareEcho = startBareEcho(PYTHON);
const engine = await createPythonEngine({ pythonExecutable: PYTHON }).load();
const model = await engine.loadModel({
  name: 'bench',
  modelDir: dir,
  device: CPU,
  options: { pythonExecutable: PYTHON },
  properties: parseServingProperties(''),
});
const context = await model.newExecutionContext();
// The same handler with every byte over the socket (option.sharedMemory=false), for comparison.
const socketModel = await engine.loadModel({
  name: 'bench-socket',
  modelDir: dir,
  device: CPU,
  options: { pythonExecutable: PYTHON, sharedMemory: 'false' },
  properties: parseServingProperties(''),
});
const socketContext = await socketModel.newExecutionContext();
const inputs = {
  tensor: NDList.of(Tensor.zeros('float32', [1, 3, 224, 224], 'x')),
  // 25 float32 = 100 bytes.
  small: NDList.of(Tensor.zeros('float32', [25], 'x')),
};
const payloads = {
  tensor: Buffer.alloc(3 * 224 * 224 * 4),
  small: Buffer.alloc(100),
};
const goals = { tensor: 150, small: 60 };
for (const kind of ['tensor', 'small'] as const) {
  const figures = await alternateRounds(
    [
      { name: 'kiln', measure: () => viaKiln(context, inputs[kind]) },
      { name: 'socket', measure: () => viaKiln(socketContext, inputs[kind]) },
      { name: 'python', measure: () => Promise.resolve(inProcess(kind)) },
      { name: 'bare', measure: () => viaBareEcho(bareEcho, payloads[kind]) },
    ],
    { rounds, warmupRounds: 1 },
  );
  const overhead = figures.kiln!.map((k, i) => k - figures.python![i]!);
  const label = kind === 'tensor' ? '600 kB tensor' : '100-byte body';
  console.log(
    `${label}: Kiln ${spreadOf(figures.kiln!).median.toFixed(0)} µs/call, in-process ${spreadOf(figures.python!).median.toFixed(0)} µs/call`,
  );
  console.log(
    goalLine(`${label} IPC overhead`, spreadOf(overhead), { atMost: goals[kind] }, ' µs', 0),
  );
  const socketOverhead = figures.socket!.map((k, i) => k - figures.python![i]!);
  console.log(
    `  with every byte over the socket (option.sharedMemory=false): ${spreadOf(figures.socket!).median.toFixed(0)} µs/call, ` +
      `IPC overhead ${formatSpread(spreadOf(socketOverhead), 0)} µs; default ÷ socket per call ${formatSpread(ratioSpread(figures.kiln!, figures.socket!), 2)}`,
  );
  const aboveBare = figures.kiln!.map((k, i) => k - figures.bare![i]!);
  console.log(
    `  bare echo of the same ${payloads[kind].length} B over the same sockets (no Kiln code): ${formatSpread(spreadOf(figures.bare!), 0)} µs/call; ` +
      `Kiln above it ${formatSpread(spreadOf(aboveBare), 0)} µs/call`,
  );
}
await bareEcho.close();
await model.dispose();
await socketModel.dispose();
rmSync(dir, { recursive: true, force: true });
console.log(machineLine());
