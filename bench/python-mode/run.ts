/**
 * Per-request cost of Kiln's Python mode: a Kiln serving context (one Python process, framed
 * IPC over sockets, large contents in shared memory), handed requests as a serve worker hands
 * them, calling handle(inputs) against the same handle called in-process in Python,
 * for a 600 kB float32 tensor (echoed, and answered with 1000 scores) and a 100-byte JSON body.
 * Rounds alternate; the overhead is taken within each round (Kiln µs/call − in-process µs/call),
 * median [min–max] over the rounds. A bare echo of the same bytes over the same kind of sockets
 * (bare-echo.ts) runs in the same rounds: the machine's floor for one round trip, and Kiln's own
 * share above it; the goal: the 600 kB call within 2× that floor.
 *
 *   node -C @kiln/source --import tsx bench/python-mode/run.ts [--rounds 5] [--calls 300]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  CPU,
  NDList,
  Tensor,
  parseServingProperties,
  type ServingContext,
  type ServingInput,
} from '@kiln/core';
import { PYTHON_PACKAGE_DIR, type PythonModel, createPythonEngine } from '@kiln/engine-python';
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
    if inputs.get_property("content-type") == "application/json":
        return Output().add_as_json(inputs.get_as_json())
    x = inputs.get_as_numpy()[0]
    # A tensor named "image" answers as a classifier does, 1000 floats; any other is echoed.
    return Output().add_as_numpy([x.reshape(-1)[:1000].copy() if inputs.contains_key("image") else x])
`;

/**
 * tensor: 600 kB in and echoed back; image: the same 600 kB in, a classifier's 1000 scores
 * (4 kB) out, as ResNet-18 answers; small: a 100-byte JSON body in, parsed and answered as JSON.
 */
type Kind = 'tensor' | 'image' | 'small';
const tensorName: Record<Kind, string> = { tensor: 'x', image: 'image', small: 'data' };
const JSON_BODY = JSON.stringify({ text: 'a'.repeat(89) });

const dir = mkdtempSync(join(tmpdir(), 'kiln-bench-python-'));
writeFileSync(join(dir, 'model.py'), MODEL);

/** µs per in-process handle() call on the same kind of Input, timed inside Python. */
function inProcess(kind: Kind): number {
  const script = `
import sys, time, numpy as np
sys.path.insert(0, ${JSON.stringify(dir)})
from model import handle
from kiln_python import Input
if ${JSON.stringify(kind)} == 'small':
    make = lambda: Input(properties={"content-type": "application/json"}, contents=[(${JSON.stringify(tensorName.small)}, ${JSON.stringify(JSON_BODY)}.encode())])
else:
    x = np.zeros((1, 3, 224, 224), np.float32)
    make = lambda: Input(contents=[(${JSON.stringify(tensorName[kind])}, x)])
handle(make())
t = time.perf_counter()
for _ in range(${calls}):
    handle(make())
print((time.perf_counter() - t) / ${calls} * 1e6)
`;
  return Number(
    execFileSync(PYTHON, ['-c', script], {
      env: { ...process.env, PYTHONPATH: PYTHON_PACKAGE_DIR },
      encoding: 'utf8',
    }).trim(),
  );
}

async function viaKiln(context: ServingContext, input: ServingInput): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await context.serve([input]);
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
const model = (await engine.loadModel({
  name: 'bench',
  modelDir: dir,
  device: CPU,
  options: { pythonExecutable: PYTHON },
  properties: parseServingProperties(''),
})) as PythonModel;
const context = await model.newServingContext();
// The same handler with every byte over the socket (option.sharedMemory=false), for comparison.
const socketModel = (await engine.loadModel({
  name: 'bench-socket',
  modelDir: dir,
  device: CPU,
  options: { pythonExecutable: PYTHON, sharedMemory: 'false' },
  properties: parseServingProperties(''),
})) as PythonModel;
const socketContext = await socketModel.newServingContext();
// Requests as the server hands them over: raw tensors (v2), and a body with its content type.
const tensorRequest = (name: string): ServingInput => ({
  tensors: NDList.of(Tensor.zeros('float32', [1, 3, 224, 224], name)),
  rawTensors: true,
});
const inputs: Record<Kind, ServingInput> = {
  tensor: tensorRequest('x'),
  image: tensorRequest('image'),
  small: { body: Buffer.from(JSON_BODY), contentType: 'application/json' },
};
// Before measuring: each kind answers what its handler branch should.
const answerBytes = { tensor: 3 * 224 * 224 * 4, image: 1000 * 4 };
for (const kind of ['tensor', 'image', 'small'] as const) {
  const [result] = await context.serve([inputs[kind]]);
  if (!result?.ok)
    throw new Error(`${kind} failed: ${result?.ok === false ? result.error.message : ''}`);
  const answer = result.value;
  if (kind === 'small') {
    if (answer.type !== 'json' || JSON.stringify(answer.value) !== JSON_BODY)
      throw new Error(`JSON answer: ${JSON.stringify(answer)}`);
  } else if (
    answer.type !== 'tensors' ||
    (answer.tensors.get(0).data as ArrayBufferView).byteLength !== answerBytes[kind]
  ) {
    throw new Error(`${kind} answered ${JSON.stringify(answer).slice(0, 80)}`);
  }
}
// The bare echo sends back what it got, so it has no floor for the image's smaller answer.
const payloads: Record<Kind, Buffer | undefined> = {
  tensor: Buffer.alloc(3 * 224 * 224 * 4),
  image: undefined,
  small: Buffer.alloc(100),
};
const goals: Record<Kind, number> = { tensor: 150, image: 150, small: 60 };
const labels: Record<Kind, string> = {
  tensor: '600 kB tensor, echoed',
  image: '600 kB tensor, 1000 scores back',
  small: '100-byte JSON body',
};
for (const kind of ['tensor', 'image', 'small'] as const) {
  const payload = payloads[kind];
  const figures = await alternateRounds(
    [
      { name: 'kiln', measure: () => viaKiln(context, inputs[kind]) },
      { name: 'socket', measure: () => viaKiln(socketContext, inputs[kind]) },
      { name: 'python', measure: () => Promise.resolve(inProcess(kind)) },
      ...(payload ? [{ name: 'bare', measure: () => viaBareEcho(bareEcho, payload) }] : []),
    ],
    { rounds, warmupRounds: 1 },
  );
  const overhead = figures.kiln!.map((k, i) => k - figures.python![i]!);
  const label = labels[kind];
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
  if (!payload) continue;
  const aboveBare = figures.kiln!.map((k, i) => k - figures.bare![i]!);
  console.log(
    `  bare echo of the same ${payload.length} B over the same sockets (no Kiln code): ${formatSpread(spreadOf(figures.bare!), 0)} µs/call; ` +
      `Kiln above it ${formatSpread(spreadOf(aboveBare), 0)} µs/call`,
  );
  const ratio = ratioSpread(figures.kiln!, figures.bare!);
  const ratioLabel = `  ${label}: Kiln ÷ bare echo floor (same rounds)`;
  // The goal is for the 600 kB call; the small body's ratio is printed as it is.
  console.log(
    kind === 'tensor'
      ? goalLine(ratioLabel, ratio, { atMost: 2 }, '×', 2)
      : `${ratioLabel}: ${formatSpread(ratio, 2)}×`,
  );
}
await bareEcho.close();
await model.dispose();
await socketModel.dispose();
rmSync(dir, { recursive: true, force: true });
console.log(machineLine());
