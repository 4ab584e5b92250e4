import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { HostTensor, ModuleWrap, NativeValue } from './binding.js';
import { loadLibTorchBinding } from './loader.js';
import { addonProblem, f32 } from './test-support.js';

const problem = addonProblem();

describe.skipIf(problem !== null)('LibTorch addon', () => {
  const t = () => loadLibTorchBinding();
  const tmp = mkdtempSync(join(tmpdir(), 'kiln-addon-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const compile = (source: string, parameters?: Record<string, HostTensor>): ModuleWrap =>
    t().ModuleWrap.compile({ source, parameters });

  it('reports its build and the dtypes it holds', () => {
    const info = t().runtimeInfo();
    expect(info.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(info.dtypes).toEqual(
      expect.arrayContaining(['bool', 'int64', 'float16', 'bfloat16', 'float32']),
    );
    expect(info.dtypes).not.toContain('string');
    expect(typeof info.mkldnnAvailable).toBe('boolean');
  });

  it('saves a compiled module with extra files and loads it back, telling absent files apart', async () => {
    const module = compile(
      'def forward(self, x: Tensor) -> Tensor:\n    return x + self.offset\n',
      { offset: f32([10]) },
    );
    const file = join(tmp, 'offset.pt');
    await module.save(file, { 'notes.txt': 'héllo', 'empty.txt': '' });
    module.dispose();
    const { module: loaded, extraFiles } = await t().ModuleWrap.load(file, {
      extraFiles: ['notes.txt', 'empty.txt', 'absent.txt'],
    });
    expect(extraFiles).toEqual({ 'notes.txt': 'héllo', 'empty.txt': '' });
    const result = await loaded.forward([f32([1, 2])]);
    expect(Array.from((result.value as HostTensor).data as Float32Array)).toEqual([11, 12]);
    expect(loaded.describe()).toMatchObject({ origin: file, device: 'cpu', methods: ['forward'] });
  });

  it('converts scalars, None, strings and large integers in both directions', async () => {
    const module = compile(`
def forward(self, n: int, f: float, flag: bool, word: str, maybe: Optional[Tensor]) -> Tuple[int, float, bool, str, Optional[Tensor], int]:
    return (n + 1, f * 2.0, not flag, word + "!", maybe, 9007199254740993)
`);
    const { value } = await module.forward([41, 1.25, true, 'hi', null]);
    expect(value).toEqual([42, 2.5, false, 'hi!', null, 9007199254740993n]);
  });

  it('holds every dtype exactly, bool bytes normalized to 0 and 1', async () => {
    const identity = compile('def forward(self, x: Tensor) -> Tensor:\n    return x\n');
    const bool = await identity.forward([
      { dtype: 'bool', shape: [3], data: Uint8Array.of(0, 7, 1) },
    ]);
    expect(Array.from((bool.value as HostTensor).data as Uint8Array)).toEqual([0, 1, 1]);
    const bf16 = await identity.forward([
      { dtype: 'bfloat16', shape: [2], data: Uint16Array.of(0x3f80, 0xc000) },
    ]);
    expect(bf16.value).toMatchObject({ dtype: 'bfloat16', data: Uint16Array.of(0x3f80, 0xc000) });
    const int64 = await identity.forward([
      { dtype: 'int64', shape: [1], data: BigInt64Array.of(-(2n ** 62n)) },
    ]);
    expect((int64.value as HostTensor).data).toEqual(BigInt64Array.of(-(2n ** 62n)));
  });

  it('never lets JavaScript write into a weight the model returned', async () => {
    const module = compile('def forward(self, x: Tensor) -> Tensor:\n    return self.w\n', {
      w: f32([1, 2, 3]),
    });
    const first = (await module.forward([f32([0])])).value as HostTensor;
    (first.data as Float32Array).fill(99);
    const second = (await module.forward([f32([0])])).value as HostTensor;
    expect(Array.from(second.data as Float32Array)).toEqual([1, 2, 3]);
  });

  it('rejects bad inputs with coded errors, never synchronously', async () => {
    const module = compile(
      'def forward(self, x: Tensor, y: Tensor) -> Tensor:\n    return x + y\n',
    );
    const codeOf = (args: NativeValue[]) =>
      module.forward(args).then(
        () => 'resolved',
        (e: { code: string }) => e.code,
      );
    expect(await codeOf([f32([1])])).toBe('INVALID_INPUT');
    expect(
      await codeOf([f32([1]), { dtype: 'float32', shape: [2], data: new Float32Array(1) }]),
    ).toBe('SHAPE_MISMATCH');
    expect(await codeOf([f32([1]), { dtype: 'string', shape: [1], data: new Uint8Array(1) }])).toBe(
      'UNSUPPORTED_DTYPE',
    );
    expect(
      await codeOf([
        f32([1]),
        { dtype: 'float32', shape: [2 ** 40, 2 ** 40], data: new Float32Array(1) },
      ]),
    ).toBe('INVALID_INPUT');
    expect(await codeOf([f32([1]), 'not a tensor'])).toBe('INVALID_INPUT');
    expect(await codeOf([f32([1, 2]), f32([1, 2, 3])])).toBe('ENGINE_ERROR');
    if (!t().runtimeInfo().dtypes.includes('uint16')) {
      expect(
        await codeOf([f32([1]), { dtype: 'uint16', shape: [1], data: new Uint16Array(1) }]),
      ).toBe('UNSUPPORTED_DTYPE');
    }
  });

  it('fails loading and compiling with coded errors', async () => {
    await expect(t().ModuleWrap.load(join(tmp, 'missing.pt'))).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
    });
    await expect(
      t().ModuleWrap.load(join(tmp, 'missing.pt'), { device: 'tpu' }),
    ).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
    expect(() =>
      compile('def forward(self, x: Tensor) -> Tensor:\n    return undefined_name\n'),
    ).toThrow(
      expect.objectContaining({
        code: 'INVALID_INPUT',
        message: expect.stringContaining('undefined_name'),
      }),
    );
  });

  it('refuses work on a disposed module and cannot be constructed from JavaScript', async () => {
    const module = compile('def forward(self, x: Tensor) -> Tensor:\n    return x\n');
    module.dispose();
    module.dispose();
    expect(module.disposed).toBe(true);
    await expect(module.forward([f32([1])])).rejects.toMatchObject({ code: 'CLOSED' });
    expect(() => module.describe()).toThrow(expect.objectContaining({ code: 'CLOSED' }));
    const Ctor = t().TensorWrap as unknown as new () => unknown;
    expect(() => new Ctor()).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
  });

  it('records the operators a forward ran, with times and nesting', async () => {
    const module = compile(
      'def forward(self, x: Tensor) -> Tensor:\n    return torch.relu(x * 2.0)\n',
    );
    const { ops } = await module.forward([f32([-1, 1])], { recordOps: true });
    const top = ops!.filter((o) => o.depth === 0).map((o) => o.name);
    expect(top).toEqual(['aten::mul', 'aten::relu']);
    expect(ops!.every((o) => o.micros >= 0)).toBe(true);
  });

  it('runs every forward of an execution context on its one thread, sharing the module', async () => {
    const module = compile('def forward(self, x: Tensor) -> Tensor:\n    return x + self.b\n', {
      b: f32([1]),
    });
    const [a, b] = [module.createContext(), module.createContext()];
    const threadsOf = async (context: typeof a) => {
      const threads = new Set<number>();
      for (let i = 0; i < 6; i++) threads.add((await context.forward([f32([i])])).observed.thread);
      return threads;
    };
    const [threadsA, threadsB] = await Promise.all([threadsOf(a), threadsOf(b)]);
    expect(threadsA.size).toBe(1);
    expect(threadsB.size).toBe(1);
    expect([...threadsA][0]).not.toBe([...threadsB][0]);
    // Disposing the module leaves its contexts working on their own reference; disposing a
    // context refuses further forwards.
    module.dispose();
    expect(
      Array.from(((await a.forward([f32([2])])).value as HostTensor).data as Float32Array),
    ).toEqual([3]);
    a.dispose();
    await expect(a.forward([f32([1])])).rejects.toMatchObject({ code: 'CLOSED' });
    b.dispose();
  });

  it('puts thread-local settings in force on the forward thread before every forward', async () => {
    const context = compile(
      'def forward(self, x: Tensor) -> Tensor:\n    return x * 2.0\n',
    ).createContext();
    const seen: [boolean, number, number][] = [];
    for (const [graphOptimizer, numThreads] of [
      [true, 2],
      [false, 1],
      [true, 1],
      [false, 2],
    ] as const) {
      const { observed } = await context.forward([f32([1])], { graphOptimizer, numThreads });
      seen.push([observed.graphOptimizer, observed.numThreads, observed.thread]);
    }
    expect(seen.map(([g, n]) => [g, n])).toEqual([
      [true, 2],
      [false, 1],
      [true, 1],
      [false, 2],
    ]);
    expect(new Set(seen.map(([, , thread]) => thread)).size).toBe(1);
    context.dispose();
  });
});
