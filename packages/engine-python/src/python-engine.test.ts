import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CPU, KilnErrorCode, NDList, Tensor, type ExecutionContext } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import type { PythonServingContext } from './python-serving-context.js';
import type { PythonModel } from './python-model.js';
import { PythonEngine, visibleGpuCount } from './python-engine.js';
import { probePython } from './probe.js';
import { TEST_PYTHON, loadTestModel, removeTestModels } from './test-support.js';
import { OPENMP_SPIN_COUNT } from './thread-env.js';

const PYTHON = TEST_PYTHON;
const { run } = await checkEngine('Python', () => probePython(PYTHON));

afterAll(removeTestModels);
const load = loadTestModel;

/** The JSON a model's handler answers to a one-byte `data` content, in a fresh context. */
async function jsonAnswer(model: PythonModel): Promise<unknown> {
  const context = await model.newExecutionContext();
  const output = await context.forward(
    NDList.of(new Tensor('uint8', new Uint8Array([1]), [1], 'data')),
  );
  return JSON.parse(Buffer.from(output.get(0).data as Uint8Array).toString());
}

const DOUBLE = `
from djl_python import Input, Output
def handle(inputs: Input):
    if inputs.is_empty():
        return None
    x = inputs.get_as_numpy()[0]
    return Output().add_as_numpy([x * 2, x.sum(keepdims=True)])
`;

describe.skipIf(!run)('Python engine', () => {
  it('runs handle(inputs) in its own process with raw tensors both ways', async () => {
    const model = await load(DOUBLE);
    const context = await model.newExecutionContext();
    const input = new Tensor('float32', new Float32Array([1, 2, 3, 4]), [2, 2], 'x');
    const output = await context.forward(NDList.of(input));
    expect(output.get(0).dtype).toBe('float32');
    expect(output.get(0).shape).toEqual([2, 2]);
    expect([...(output.get(0).data as Float32Array)]).toEqual([2, 4, 6, 8]);
    expect([...(output.get(1).data as Float32Array)]).toEqual([10]);
    expect(model.describe()).toMatchObject({
      entryPoint: 'model.py',
      handler: 'handle',
      pythonVersion: expect.stringMatching(/^3\.\d+\.\d+/) as unknown,
      workers: 1,
    });
    await model.dispose();
  });

  it('carries a 600 kB tensor both ways intact', async () => {
    const model = await load(DOUBLE);
    const context = await model.newExecutionContext();
    const data = Float32Array.from({ length: 150_528 }, (_, i) => (i % 1000) - 500);
    const output = await context.forward(NDList.of(new Tensor('float32', data, [1, 3, 224, 224])));
    expect(output.get(0).shape).toEqual([1, 3, 224, 224]);
    expect((output.get(0).data as Float32Array).every((v, i) => v === 2 * data[i]!)).toBe(true);
    await model.dispose();
  });

  it('hands large contents over through shared memory, each call its own', async () => {
    const model = await load(`
import hashlib
from djl_python import Input, Output
import numpy as np
def handle(inputs: Input):
    if inputs.is_empty():
        return None
    x = inputs.get_as_numpy("x")[0]
    raw = inputs.get_as_bytes("raw")
    x.flat[0] = -1  # the handler owns its input: the change stays in its copy
    return Output().add_as_numpy([x * 2, np.frombuffer(hashlib.sha256(raw).digest(), np.uint8)])
`);
    const context = (await model.newExecutionContext()) as PythonServingContext;
    expect(context.sharedInputProblem).toBeUndefined();
    for (const seed of [1, 2, 3]) {
      const data = Float32Array.from({ length: 150_528 }, (_, i) => ((i * seed) % 1000) - 500);
      const raw = Uint8Array.from({ length: 100_000 }, (_, i) => (i * seed) % 251);
      const output = await context.forward(
        NDList.of(
          new Tensor('float32', data, [1, 3, 224, 224], 'x'),
          new Tensor('uint8', raw, [raw.length], 'raw'),
        ),
      );
      const doubled = output.get(0).data as Float32Array;
      expect(doubled[0]).toBe(-2);
      expect(doubled.subarray(1).every((v, i) => v === 2 * data[i + 1]!)).toBe(true);
      expect(Buffer.from(output.get(1).data as Uint8Array).toString('hex')).toBe(
        createHash('sha256').update(raw).digest('hex'),
      );
      expect(data[0]).toBe(-500); // the caller's tensor is untouched
    }
    expect(context.sharedInputCalls).toBe(3);
    expect(context.sharedAnswerContents).toBe(3); // the doubled tensors; hashes are small

    // Two calls at once: the second finds the regions taken and goes over the socket.
    const inputs = [3, 5].map((k) =>
      NDList.of(
        new Tensor('float32', new Float32Array(150_528).fill(k), [150_528], 'x'),
        new Tensor('uint8', new Uint8Array(100_000).fill(k), [100_000], 'raw'),
      ),
    );
    const answers = await Promise.all(inputs.map((input) => context.forward(input)));
    expect(answers.map((a) => (a.get(0).data as Float32Array)[7])).toEqual([6, 10]);
    expect(context.sharedInputCalls).toBe(4);
    expect(context.sharedAnswerContents).toBe(4);
    await model.dispose();

    // option.sharedMemory=false: every byte over the socket, the same answers.
    const plain = await load(DOUBLE, { sharedMemory: 'false' });
    const socketOnly = (await plain.newExecutionContext()) as PythonServingContext;
    const data = Float32Array.from({ length: 150_528 }, (_, i) => i % 7);
    const output = await socketOnly.forward(NDList.of(new Tensor('float32', data, [150_528])));
    expect((output.get(0).data as Float32Array).every((v, i) => v === 2 * data[i]!)).toBe(true);
    expect(socketOnly.sharedInputCalls).toBe(0);
    expect(socketOnly.sharedInputProblem).toBe('off');
    expect(plain.describe()).toMatchObject({ sharedMemory: false });
    await plain.dispose();
  });

  it('gives each context its own Python process', async () => {
    const model = await load(`
import os
from djl_python import Output
import numpy as np
def handle(inputs):
    return Output().add_as_numpy([np.array([os.getpid()], dtype=np.int64)])
`);
    const [a, b] = await Promise.all([model.newExecutionContext(), model.newExecutionContext()]);
    const pid = async (c: ExecutionContext) => (await c.forward(new NDList())).get(0).data[0];
    expect(await pid(a)).not.toEqual(await pid(b));
    expect(await pid(a)).not.toEqual(BigInt(process.pid));
    await model.dispose();
  });

  it('runs the DJL Input/Output API: bytes, strings, JSON, npz, properties', async () => {
    const model = await load(`
import io, json
import numpy as np
from djl_python import Input, Output
def handle(inputs: Input):
    if inputs.is_empty():
        return None
    out = Output()
    out.add_property("seen", inputs.get_property("missing") is None)
    out.add_as_json({"text": inputs.get_as_string("text"), "json": inputs.get_as_json("doc"),
                     "batch": inputs.is_batch(), "n": len(inputs.get_batches()),
                     "props": inputs.get_properties()}, key="json")
    buf = io.BytesIO(); np.savez(buf, np.arange(3, dtype=np.int32))
    npz = Input(contents=[("f", buf.getvalue())]).get_as_npz()
    out.add_as_numpy(npz, key="npz")
    out.add(inputs.get_as_bytes("text"), key="raw")
    return out
`);
    const context = await model.newExecutionContext();
    const text = new Tensor('uint8', new TextEncoder().encode('héllo'), [6], 'text');
    const doc = new Tensor('uint8', new TextEncoder().encode('{"a":[1,2]}'), [11], 'doc');
    const output = await context.forward(NDList.of(text, doc));
    const json = JSON.parse(
      Buffer.from(output.get('json').data as Uint8Array).toString(),
    ) as unknown;
    expect(json).toEqual({
      text: 'héllo',
      json: { a: [1, 2] },
      batch: false,
      n: 1,
      props: { model_dir: model.modelDir, device_id: '-1', handler: 'handle' },
    });
    expect(output.get('npz').dtype).toBe('int32');
    expect([...(output.get('npz').data as Int32Array)]).toEqual([0, 1, 2]);
    expect(Buffer.from(output.get('raw').data as Uint8Array).toString()).toBe('héllo');
    await model.dispose();
  });

  it("hands DJL's init parameters to initialize(): serving.properties, model_dir, device_id", async () => {
    // The shape of DJL Serving's handler template: a service initialized from the first call.
    const model = await load(
      `
import json, os
from djl_python import Input, Output
class Service:
    def __init__(self):
        self.initialized = False
    def initialize(self, properties):
        self.model_dir = properties["model_dir"]
        self.device = "cpu" if int(properties["device_id"]) < 0 else "cuda:" + properties["device_id"]
        self.batch_size = int(properties.get("batch_size", 1))
        self.greeting = properties.get("greeting")
        self.env = properties.get("env")
        self.initialized = True
_service = Service()
def handle(inputs: Input):
    if not _service.initialized:
        _service.initialize(inputs.get_properties())
    if inputs.is_empty():
        return None
    return Output().add_as_json({"dir": os.path.samefile(_service.model_dir, os.getcwd()),
        "device": _service.device, "batch_size": _service.batch_size,
        "greeting": _service.greeting, "env": _service.env,
        "every_call": inputs.get_property("model_dir") == _service.model_dir})
`,
      { greeting: 'hi' },
      'batch_size=4\noption.env=A=1\nmax_batch_delay=5\n',
    );
    expect(model.initProperties).toEqual({
      batch_size: '4',
      max_batch_delay: '5',
      pythonExecutable: PYTHON,
      greeting: 'hi',
    });
    expect(await jsonAnswer(model)).toEqual({
      dir: true,
      device: 'cpu',
      batch_size: 4,
      greeting: 'hi',
      env: null,
      every_call: true,
    });
    await model.dispose();
  });

  it("adds option.env to the worker's environment and refuses an entry that is not KEY=VALUE", async () => {
    const model = await load(
      `
import os
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    return Output().add_as_json([os.environ.get("KILN_A"), os.environ.get("KILN_B")])
`,
      {},
      'option.env=KILN_A=1, KILN_B=x=y\n',
    );
    expect(await jsonAnswer(model)).toEqual(['1', 'x=y']);
    await model.dispose();
    await expect(load(DOUBLE, { env: 'KILN_A' })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
    });
  });

  it("starts each worker with the pool's thread budget for OpenMP (torch, numpy), unless option.env sets it", async () => {
    const threadsHandler = `
import os
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    return Output().add_as_json(os.environ.get("OMP_NUM_THREADS"))
`;
    const spinHandler = threadsHandler.replace('OMP_NUM_THREADS', 'GOMP_SPINCOUNT');
    const answer = async (model: PythonModel, intraOpThreads: number) => {
      const context = await model.newExecutionContext({ intraOpThreads });
      const output = await context.forward(
        NDList.of(new Tensor('uint8', new Uint8Array([1]), [1])),
      );
      return JSON.parse(Buffer.from(output.get(0).data as Uint8Array).toString());
    };
    const budgeted = await load(threadsHandler);
    expect(await answer(budgeted, 1)).toBe('1');
    expect(await answer(budgeted, 3)).toBe('3');
    await budgeted.dispose();
    const chosen = await load(threadsHandler, {}, 'option.env=OMP_NUM_THREADS=5\n');
    expect(await answer(chosen, 1)).toBe('5');
    await chosen.dispose();
    // OpenMP's idle threads spin briefly, unless the server's environment says how they wait.
    const spin = await load(spinHandler);
    const expected =
      process.env.GOMP_SPINCOUNT ?? (process.env.OMP_WAIT_POLICY ? null : OPENMP_SPIN_COUNT);
    expect(await answer(spin, 1)).toBe(expected);
    await spin.dispose();
  });

  it('imports option.entryPoint as a module when it is not a .py file, as DJL Serving does', async () => {
    const model = await load('raise RuntimeError("model.py is not the entry point")\n', {
      entryPoint: 'handlers.tiny',
    });
    mkdirSync(join(model.modelDir, 'handlers'));
    writeFileSync(join(model.modelDir, 'handlers', '__init__.py'), '');
    writeFileSync(
      join(model.modelDir, 'handlers', 'tiny.py'),
      `from djl_python import Output
def handle(inputs):
    return None if inputs.is_empty() else Output().add_as_json(__name__)
`,
    );
    expect(await jsonAnswer(model)).toBe('handlers.tiny');
    await model.dispose();
    await expect(load(DOUBLE, { entryPoint: '../x' })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
    });
    await expect(load(DOUBLE, { entryPoint: 'missing.py' })).rejects.toMatchObject({
      code: KilnErrorCode.ModelLoadFailed,
    });
  });

  it('answers a handler exception as an engine error and keeps the worker', async () => {
    const model = await load(`
def handle(inputs):
    if inputs.is_empty():
        return None
    raise ValueError("bad pixels")
`);
    const context = await model.newExecutionContext();
    await expect(context.forward(new NDList([Tensor.zeros('float32', [1])]))).rejects.toMatchObject(
      {
        code: KilnErrorCode.EngineError,
        message: 'ValueError: bad pixels',
      },
    );
    await expect(context.forward(new NDList([Tensor.zeros('float32', [1])]))).rejects.toThrow(
      /bad pixels/,
    );
    await model.dispose();
  });

  it('fails a crashed call with WORKER_CRASHED and reports the death (the pool replaces it)', async () => {
    const model = await load(`
import os
from djl_python import Output
def handle(inputs):
    if not inputs.is_empty() and inputs.get_as_numpy()[0][0] == 1:
        os._exit(3)
    return Output().add("ok")
`);
    const context = await model.newServingContext();
    const death = new Promise((resolve) => context.onDeath(resolve));
    await expect(
      context.forward(NDList.of(new Tensor('float32', new Float32Array([1]), [1]))),
    ).rejects.toMatchObject({
      code: KilnErrorCode.WorkerCrashed,
    });
    expect(await death).toMatchObject({
      code: KilnErrorCode.WorkerCrashed,
      message: expect.stringContaining('exited (code 3)') as unknown,
    });
    // Not replaced here: the context is dead, a new one serves.
    await expect(context.forward(NDList.of(Tensor.zeros('float32', [1])))).rejects.toMatchObject({
      code: KilnErrorCode.WorkerCrashed,
    });
    const fresh = await model.newServingContext();
    const output = await fresh.forward(NDList.of(Tensor.zeros('float32', [1])));
    expect(Buffer.from(output.get(0).data as Uint8Array).toString()).toBe('ok');
    await model.dispose();
  });

  it('kills a handler that outlives option.predict_timeout and reports the death', async () => {
    const model = await load(
      `
import time
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    if inputs.get_as_numpy()[0].flat[0] < 0:
        time.sleep(60)
    return Output().add("ok")
`,
      { predict_timeout: '0.5' },
    );
    const context = await model.newServingContext();
    const death = new Promise((resolve) => context.onDeath(resolve));
    await expect(
      context.forward(NDList.of(new Tensor('float32', new Float32Array([-1]), [1]))),
    ).rejects.toMatchObject({ code: KilnErrorCode.Timeout });
    expect(await death).toMatchObject({
      code: KilnErrorCode.WorkerCrashed,
      message: expect.stringContaining('killed after a timeout') as unknown,
    });
    await model.dispose();
  });

  it('fails loading with the reason when model.py does not import', async () => {
    const model = await load('import no_such_module_here\n');
    await expect(model.newExecutionContext()).rejects.toMatchObject({
      code: KilnErrorCode.ModelLoadFailed,
      message: expect.stringMatching(/No module named 'no_such_module_here'/) as unknown,
    });
  });

  it('names a missing interpreter in the load error', async () => {
    await expect(load('', { pythonExecutable: '/nonexistent/python3' })).rejects.toMatchObject({
      code: KilnErrorCode.ModelLoadFailed,
      message: expect.stringContaining('option.pythonExecutable') as unknown,
    });
  });

  it('gives the pool option.model_loading_timeout as its start timeout, and ends a start it abandons', async () => {
    const model = await load('import time\ntime.sleep(60)\n', { model_loading_timeout: '0.5' });
    expect(model.contextStartTimeoutMs).toBe(500);
    expect((await load(DOUBLE)).contextStartTimeoutMs).toBe(240_000);
    const abandoned = new AbortController();
    setTimeout(() => abandoned.abort(), 300);
    const started = performance.now();
    await expect(model.newServingContext({ signal: abandoned.signal })).rejects.toMatchObject({
      code: KilnErrorCode.ModelLoadFailed,
    });
    // The sleeping process was killed, not left to its 60 s.
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(model.describe()).toMatchObject({ workers: 0 });
  });
});

describe('visibleGpuCount', () => {
  const nodes = () => ['null', 'nvidia0', 'nvidia1', 'nvidiactl', 'nvidia-uvm', 'nvidia-modeset'];

  it("counts the driver's /dev/nvidiaN nodes", () => {
    expect(visibleGpuCount({}, nodes)).toBe(2);
    expect(visibleGpuCount({}, () => ['null', 'tty'])).toBe(0);
    expect(
      visibleGpuCount({}, () => {
        throw new Error('no /dev');
      }),
    ).toBe(0);
  });

  it('keeps to CUDA_VISIBLE_DEVICES, up to its first entry that is not a device', () => {
    expect(visibleGpuCount({ CUDA_VISIBLE_DEVICES: '1' }, nodes)).toBe(1);
    expect(visibleGpuCount({ CUDA_VISIBLE_DEVICES: '0,1,2' }, nodes)).toBe(2);
    expect(visibleGpuCount({ CUDA_VISIBLE_DEVICES: '' }, nodes)).toBe(0);
    expect(visibleGpuCount({ CUDA_VISIBLE_DEVICES: '-1' }, nodes)).toBe(0);
    expect(visibleGpuCount({ CUDA_VISIBLE_DEVICES: '1,-1,0' }, nodes)).toBe(1);
    expect(visibleGpuCount({ CUDA_VISIBLE_DEVICES: 'GPU-8f2a-11' }, nodes)).toBe(1);
  });

  it('offers each GPU as a device next to the CPU', () => {
    expect(new PythonEngine(PYTHON, 2).devices()).toEqual([
      CPU,
      { type: 'gpu', id: 0 },
      { type: 'gpu', id: 1 },
    ]);
  });
});
