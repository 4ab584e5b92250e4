import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyTensor, CPU, type DType, KilnError, NDList, Tensor } from '@kiln/core';
import { tfjsAffineModel, tfjsIdentityModel } from '@kiln/testing';
import { loadTfModel } from '../model/load-model.js';
import { type TfRuntime, resolveRuntime } from '../runtime/resolve-runtime.js';
import { complexGraph, matMulGraph, whereGraph } from '../test-support/graphs.js';
import { temporaryFolder } from '../test-support/requests.js';
import { TfModelRunner } from './model-runner.js';

const tmp = temporaryFolder('runner');
let runtime: TfRuntime;
const runners: TfModelRunner[] = [];

beforeAll(async () => {
  runtime = await resolveRuntime(['wasm']);
});
afterAll(() => {
  runners.forEach((r) => r.dispose());
  tmp.remove();
});

const folder = (label: string) => fs.mkdtempSync(path.join(tmp.dir, `${label}-`));

async function runnerFor(dir: string): Promise<TfModelRunner> {
  const runner = new TfModelRunner(
    runtime,
    path.basename(dir),
    await loadTfModel(runtime, { name: 'm', modelDir: dir, device: CPU, options: {} }),
  );
  runners.push(runner);
  return runner;
}

const f32 = (values: number[], shape: number[], name?: string) =>
  new Tensor('float32', Float32Array.from(values), shape, name);

async function failure(promise: Promise<unknown>): Promise<KilnError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(KilnError);
  return error as KilnError;
}

describe('TfModelRunner', () => {
  it('binds named tensors by name and unnamed ones by position', async () => {
    const runner = await runnerFor(await matMulGraph(folder('bind')));
    const a = [1, 2, 3, 4];
    const b = [10, 20, 30, 40];
    const byName = await runner.run(NDList.of(f32(b, [2, 2], 'b'), f32(a, [2, 2], 'a')));
    const byPosition = await runner.run(NDList.of(f32(a, [2, 2]), f32(b, [2, 2])));
    expect(Array.from(byName.get('product').data as Float32Array)).toEqual([70, 100, 150, 220]);
    expect(Array.from(byPosition.get('product').data as Float32Array)).toEqual([70, 100, 150, 220]);
  });

  it('refuses unknown, repeated and missing inputs with INVALID_INPUT', async () => {
    const runner = await runnerFor(await matMulGraph(folder('names')));
    const one = f32([1], [1, 1]);
    expect(
      (await failure(runner.run(NDList.of(one.withName('a'), one.withName('c'))))).message,
    ).toContain('unknown input "c"');
    expect(
      (await failure(runner.run(NDList.of(one.withName('a'), one.withName('a'))))).message,
    ).toContain('given twice');
    expect((await failure(runner.run(NDList.of(one.withName('a'))))).code).toBe('INVALID_INPUT');
  });

  it('refuses dtypes tfjs cannot hold with UNSUPPORTED_DTYPE, and a wrong held dtype with INVALID_INPUT', async () => {
    const runner = await runnerFor(await tfjsIdentityModel(folder('dtypes'), 'int32'));
    const unheld: DType[] = ['int64', 'uint8', 'int16', 'float64', 'float16', 'uint32'];
    for (const dtype of unheld) {
      const x: AnyTensor = Tensor.zeros(dtype, [1, 4], 'x');
      const error = await failure(runner.run(NDList.of(x)));
      expect(error.code).toBe('UNSUPPORTED_DTYPE');
      expect(error.message).toContain(`input x is ${dtype}`);
    }
    const wrong = await failure(runner.run(NDList.of(f32([1, 2, 3, 4], [1, 4], 'x'))));
    expect(wrong).toMatchObject({
      code: 'INVALID_INPUT',
      message: 'input x expects int32, got float32',
    });
    const ok = await runner.run(
      NDList.of(new Tensor('int32', new Int32Array([5, -6, 7, 2 ** 31 - 1]), [1, 4], 'x')),
    );
    expect(Array.from(ok.get(0).data as Int32Array)).toEqual([5, -6, 7, 2 ** 31 - 1]);
  });

  it('refuses at load a model whose output tfjs gives as complex64', async () => {
    const error = await failure(
      loadTfModel(runtime, {
        name: 'c',
        modelDir: await complexGraph(folder('complex')),
        device: CPU,
        options: {},
      }),
    );
    expect(error.code).toBe('UNSUPPORTED_DTYPE');
    expect(error.message).toContain('output z is complex64');
  });

  it('runs graphs with dynamic ops through executeAsync', async () => {
    const runner = await runnerFor(await whereGraph(folder('where')));
    expect(runner.model.asynchronous).toBe(false);
    const condition = new Tensor('bool', Uint8Array.from([0, 1, 1, 0, 1]), [5], 'condition');
    const indices = (await runner.run(NDList.of(condition))).get('indices');
    expect(runner.model.asynchronous).toBe(true);
    expect(indices.dtype).toBe('int32');
    expect([...indices.shape]).toEqual([3, 1]);
    expect(Array.from(indices.data as Int32Array)).toEqual([1, 2, 4]);
  });

  it('reports a failure inside tfjs as ENGINE_ERROR and goes on serving', async () => {
    const runner = await runnerFor(await matMulGraph(folder('engine-error')));
    const error = await failure(
      runner.run(NDList.of(f32([1, 2, 3, 4, 5, 6], [2, 3], 'a'), f32([1, 2, 3, 4], [2, 2], 'b'))),
    );
    expect(error.code).toBe('ENGINE_ERROR');
    const ok = await runner.run(NDList.of(f32([2], [1, 1], 'a'), f32([3], [1, 1], 'b')));
    expect(Array.from(ok.get(0).data as Float32Array)).toEqual([6]);
  });

  it('leaves tf.memory() flat across thousands of requests: sync, async, strings and failures', async () => {
    const affine = await runnerFor((await tfjsAffineModel(folder('memory-affine'))).dir);
    const where = await runnerFor(await whereGraph(folder('memory-where')));
    const strings = await runnerFor(await tfjsIdentityModel(folder('memory-strings'), 'string'));
    const matMul = await runnerFor(await matMulGraph(folder('memory-matmul')));
    const round = async (i: number) => {
      await affine.run(NDList.of(f32([i, 1, 2, 3, 4, 5, 6, 7], [2, 4], 'x')));
      await where.run(
        NDList.of(new Tensor('bool', Uint8Array.from([i % 2, 1, 0]), [3], 'condition')),
      );
      await strings.run(NDList.of(new Tensor('string', ['a', `${i}`, 'é', '✓'], [1, 4], 'x')));
      await matMul
        .run(NDList.of(f32([1, 2], [1, 2], 'a'), f32([1, 2, 3], [3, 1], 'b')))
        .catch(() => undefined);
    };
    await round(0); // first runs compile and cache what they keep for good
    const before = runtime.tf.memory();
    for (let i = 1; i <= 750; i++) await round(i);
    const after = runtime.tf.memory();
    expect(after.numTensors).toBe(before.numTensors);
    expect(after.numBytes).toBe(before.numBytes);
  });
});
