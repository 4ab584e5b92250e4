import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Engine, EngineRegistry, KilnError, NDList, Tensor } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import type { HostTensor, TensorWrap } from '@kiln/libtorch-native';
import { probeLibTorch } from './probe.js';
import { provider } from './provider.js';
import type { PtExecutionContext } from './pt-execution-context.js';
import type { PtModel } from './pt-model.js';
import { loadFolder, modelFolder, randomTensor, slowSpec } from './test-support/models.js';

const availability = await checkEngine('PyTorch', probeLibTorch);

describe.skipIf(!availability.run)('PyTorch engine', () => {
  let engine: Engine;
  let root: string;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'kiln-pt-'));
    const registry = new EngineRegistry({});
    registry.register(provider);
    engine = await registry.get('PyTorch');
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const load = async (
    label: string,
    spec: Parameters<typeof modelFolder>[2],
    options: Record<string, string> = {},
  ) => (await loadFolder(engine, await modelFolder(root, label, spec), options)) as PtModel;

  it('is found by .pt files and describes LibTorch', async () => {
    expect(provider.recognizes(['resnet/model.pt'])).toBe(true);
    expect(provider.recognizes(['m.TorchScript'])).toBe(true);
    expect(provider.recognizes(['model.onnx'])).toBe(false);
    expect(engine.version).toMatch(/^\d+\.\d+/);
    expect(engine.devices()).toContainEqual({ type: 'cpu', id: 0 });
    expect(engine.describe()).toMatchObject({
      runtime: 'LibTorch',
      dtypes: expect.arrayContaining(['bfloat16', 'int64']),
    });
  });

  it('reads back the extra files asked for, leaving out absent ones', async () => {
    const model = await load(
      'extra',
      {
        source: 'def forward(self, x: Tensor) -> Tensor:\n    return x\n',
        extraFiles: { 'labels.txt': 'cat\ndog\n', 'config.json': '{"k":1}' },
      },
      { extraFiles: 'labels.txt, config.json, absent.txt' },
    );
    expect(model.extraFiles).toEqual({ 'labels.txt': 'cat\ndog\n', 'config.json': '{"k":1}' });
    expect(model.describe()).toMatchObject({
      extraFiles: ['labels.txt', 'config.json'],
      signature: 'schema',
    });
    await model.dispose();
  });

  it('returns tuple, dict and list outputs flattened with names, and raw through forwardValues', async () => {
    const model = await load('nested', {
      source: `
def forward(self, x: Tensor) -> Tuple[Tensor, Dict[str, Tensor], List[Tensor]]:
    return (x + 1, {"double": x * 2, "neg": -x}, [x, x - 1])
`,
    });
    const context = await model.newExecutionContext();
    const x = new Tensor('float32', Float32Array.of(1, 2), [2], 'x');
    const flat = await context.forward(NDList.of(x));
    expect(flat.names).toEqual([undefined, 'double', 'neg', undefined, undefined]);
    expect(flat.tensors.map((t) => Array.from(t.data as Float32Array))).toEqual([
      [2, 3],
      [2, 4],
      [-1, -2],
      [1, 2],
      [0, 1],
    ]);

    const raw = await context.forwardValues([x]);
    const [first, dict, list] = raw.value as [HostTensor, Record<string, HostTensor>, HostTensor[]];
    expect(Array.from(first.data as Float32Array)).toEqual([2, 3]);
    expect(Object.keys(dict)).toEqual(['double', 'neg']);
    expect(list).toHaveLength(2);
    await model.dispose();
  });

  it('passes tuples, lists and string-keyed dicts as inputs', async () => {
    const model = await load('containers', {
      source: `
def forward(self, pair: Tuple[Tensor, Tensor], items: List[Tensor], named: Dict[str, Tensor], scale: int = 1) -> Tensor:
    total = pair[0] + pair[1] + named["bias"]
    for item in items:
        total = total + item
    return total * scale
`,
    });
    const context = await model.newExecutionContext();
    const t = (v: number) => new Tensor('int64', BigInt64Array.of(BigInt(v)), [1]);
    const result = await context.forwardValues([
      [t(1), t(2)],
      [t(10), t(20), t(30)],
      { bias: t(100) },
      2,
    ]);
    expect((result.value as HostTensor).data).toEqual(BigInt64Array.of(326n));

    const dictModel = await load('dict-input', {
      source:
        'def forward(self, inputs: Dict[str, Tensor]) -> Tensor:\n    return inputs["a"] - inputs["b"]\n',
    });
    const out = await (
      await dictModel.newExecutionContext()
    ).forward(
      NDList.of(
        new Tensor('float32', Float32Array.of(5), [1], 'b'),
        new Tensor('float32', Float32Array.of(8), [1], 'a'),
      ),
    );
    expect(Array.from(out.get(0).data as Float32Array)).toEqual([3]);
    await Promise.all([model.dispose(), dictModel.dispose()]);
  });

  it('turns an exception raised by the model into a KilnError and keeps serving', async () => {
    const model = await load('throws', {
      source: `
def forward(self, x: Tensor) -> Tensor:
    assert bool(x.sum() <= 0), "refusing positive input"
    return x * 2
`,
    });
    const context = await model.newExecutionContext();
    const error = await context
      .forward(NDList.of(new Tensor('float32', Float32Array.of(1), [1])))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KilnError);
    expect(error).toMatchObject({
      code: 'ENGINE_ERROR',
      message: expect.stringContaining('refusing positive input'),
    });
    const ok = await context.forward(NDList.of(new Tensor('float32', Float32Array.of(-1), [1])));
    expect(Array.from(ok.get(0).data as Float32Array)).toEqual([-2]);
    await model.dispose();
  });

  it('reports a wrong dtype: checked against a stored signature, else as LibTorch reports it', async () => {
    const source =
      'def forward(self, x: Tensor) -> Tensor:\n    return torch.matmul(x, self.weight)\n';
    const parameters = { weight: randomTensor([2, 2], 4) };
    const declared = await load('typed', {
      source,
      parameters,
      signature: {
        inputs: [{ name: 'x', dtype: 'float32', shape: [-1, 2] }],
        outputs: [{ name: 'y', dtype: 'float32', shape: [-1, 2] }],
      },
    });
    const undeclared = await load('untyped', { source, parameters });
    // A module without a stored signature declares names only: any dtype, any shape.
    expect(undeclared.inputs).toEqual([{ name: 'x' }]);
    const int64 = NDList.of(new Tensor('int64', new BigInt64Array(2), [1, 2], 'x'));
    await expect((await declared.newExecutionContext()).forward(int64)).rejects.toMatchObject({
      code: 'INVALID_INPUT',
      message: 'input x expects float32, got int64',
    });
    const engineError = await (
      await undeclared.newExecutionContext()
    )
      .forward(int64)
      .catch((e: unknown) => e);
    expect(engineError).toBeInstanceOf(KilnError);
    expect(engineError).toMatchObject({
      code: 'ENGINE_ERROR',
      message: expect.stringMatching(/expected scalar type/i),
    });
    const strings = NDList.of(new Tensor('string', ['a', 'b'], [1, 2], 'x'));
    await expect((await undeclared.newExecutionContext()).forward(strings)).rejects.toMatchObject({
      code: 'UNSUPPORTED_DTYPE',
    });
    await Promise.all([declared.dispose(), undeclared.dispose()]);
  });

  it('fails cleanly for a missing model file, an unavailable device and a bad option', async () => {
    await expect(loadFolder(engine, root + '/nowhere')).rejects.toMatchObject({
      code: 'MODEL_NOT_FOUND',
    });
    const dir = await modelFolder(root, 'device', {
      source: 'def forward(self, x: Tensor) -> Tensor:\n    return x\n',
    });
    await expect(
      engine.loadModel({
        name: 'gpu',
        modelDir: dir,
        device: { type: 'gpu', id: 0 },
        options: {},
        properties: { ...(await loadFolder(engine, dir)).properties },
      }),
    ).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('CPU-only LibTorch'),
    });
    await expect(loadFolder(engine, dir, { graph_optimizer: 'maybe' })).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
  });

  it('runs forwards of two contexts of one model at the same time, on one shared module', async () => {
    // Unfrozen, so that describe() counts the weights the two contexts share.
    const model = await load('slow', slowSpec(), {
      num_threads: '1',
      optimize_for_inference: 'false',
    });
    const [a, b] = await Promise.all([model.newExecutionContext(), model.newExecutionContext()]);
    const x = randomTensor([32, 192], 5, 'x');
    await a.forward(NDList.of(x));
    const [ra, rb] = await Promise.all([a.forwardValues([x]), b.forwardValues([x])]);
    // Each interval starts before the other ends: both ran at once on pool threads.
    expect(ra.startedUs).toBeLessThan(rb.finishedUs);
    expect(rb.startedUs).toBeLessThan(ra.finishedUs);
    expect((ra.value as HostTensor).data).toEqual((rb.value as HostTensor).data);
    expect(model.describe()).toMatchObject({ parameters: { count: 1, bytes: 192 * 192 * 4 } });
    await model.dispose();
  });

  it('keeps outputs in LibTorch for the next step and frees them on dispose', async () => {
    const model = await load('chain', {
      source: 'def forward(self, x: Tensor) -> Tensor:\n    return x * 3\n',
    });
    const context: PtExecutionContext = await model.newExecutionContext();
    const first = await context.forwardValues([new Tensor('float32', Float32Array.of(1, 2), [2])], {
      keepOnDevice: true,
    });
    const native = first.value as TensorWrap;
    expect([native.dtype, native.shape, native.device]).toEqual(['float32', [2], 'cpu']);
    const second = await context.forwardValues([native]);
    expect(Array.from((second.value as HostTensor).data as Float32Array)).toEqual([9, 18]);
    native.dispose();
    await expect(native.toHost()).rejects.toMatchObject({ code: 'CLOSED' });
    await model.dispose();
  });

  it('lets running forwards finish when the model is disposed, then refuses new ones', async () => {
    const model = await load('dispose', slowSpec());
    const context = await model.newExecutionContext();
    const x = NDList.of(randomTensor([32, 192], 6, 'x'));
    const running = context.forward(x);
    await model.dispose();
    expect((await running).get(0).shape).toEqual([32, 192]);
    await expect(context.forward(x)).rejects.toMatchObject({ code: 'CLOSED' });
    await expect(model.newExecutionContext()).rejects.toMatchObject({ code: 'CLOSED' });
  });
});
