import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { join } from 'node:path';
import { CPU, NDList, Tensor, servingPropertiesFrom } from '@kiln/core';
import { mlpModel } from '@kiln/model-tools';
import { checkEngine, threadStatusField } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrtModel } from './ort-model.js';
import { parseSessionConfig, threadAffinities, toSessionOptions } from './options.js';
import { probeOrt } from './probe.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

describe('intra-op thread affinities (core pinning)', () => {
  it("writes one 1-based processor per thread but the caller's, wrapping around", () => {
    expect(threadAffinities([4, 5, 6], 3)).toBe('6;7');
    expect(threadAffinities([0], 3)).toBe('1;1');
    expect(threadAffinities([2, 3], 1)).toBe('');
  });

  it('runs a pinned session with one thread per core unless the user chose', () => {
    const pinned = { ...parseSessionConfig({}, CPU), cpuCores: [0, 1] };
    expect(toSessionOptions(pinned)).toMatchObject({
      intraOpNumThreads: 2,
      extra: { session: { intra_op_thread_affinities: '2', intra_op: { allow_spinning: '0' } } },
    });
    const chosen = { ...parseSessionConfig({ intraOpNumThreads: '3' }, CPU), cpuCores: [0, 1] };
    expect(toSessionOptions(chosen)).toMatchObject({
      intraOpNumThreads: 3,
      extra: { session: { intra_op_thread_affinities: '2;1' } },
    });
    const one = { ...parseSessionConfig({}, CPU), cpuCores: [1] };
    expect(toSessionOptions(one).extra).toEqual({
      session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } },
    });
  });
});

/** Thread id → the cores it may run on, for this process's threads. */
const threadAffinity = () => threadStatusField('Cpus_allowed_list');

describe.skipIf(!run || process.platform !== 'linux' || os.availableParallelism() < 2)(
  'a pinned ONNX Runtime session',
  () => {
    let root: string;
    let mlp: string;
    beforeAll(async () => {
      root = await mkdtemp(join(os.tmpdir(), 'kiln-ort-affinity-'));
      mlp = (await mlpModel(join(root, 'mlp'), { inputSize: 64, hidden: [64], outputSize: 4 })).dir;
    });
    afterAll(async () => {
      await rm(root, { recursive: true, force: true });
    });

    it('places its second intra-op thread on the core asked for, and answers', async () => {
      const before = threadAffinity();
      const last = os.availableParallelism() - 1;
      const request = {
        name: 'mlp',
        modelDir: mlp,
        device: CPU,
        options: {},
        properties: servingPropertiesFrom({}),
        intraOpThreads: 2,
        cpuCores: [0, last],
      };
      const model = await OrtModel.load(request);
      const context = await model.newExecutionContext({ intraOpThreads: 2, cpuCores: [0, last] });
      try {
        expect(context.pinnedCores).toEqual([0, last]);
        // ONNX Runtime's one extra intra-op thread (the caller is the first) sits on `last`;
        // the thread applies its mask itself once it runs.
        const startedOn = () =>
          [...threadAffinity()].filter(([tid]) => !before.has(tid)).map(([, cores]) => cores);
        for (let i = 0; i < 100 && !startedOn().includes(String(last)); i++) await delay(20);
        expect(startedOn()).toContain(String(last));
        const input = new Tensor('float32', new Float32Array(64).fill(0.5), [1, 64], 'x');
        const output = (await context.forward(NDList.of(input))).get(0);
        expect(output.shape).toEqual([1, 4]);
      } finally {
        await context.close();
        await model.dispose();
      }
    });
  },
);
