// Native TensorFlow through tfjs-node: these tests run where @tensorflow/tfjs-node is installed
// (KILN_REQUIRE_ENGINES=TensorFlow/tfjs-node makes them required there); its install downloads
// libtensorflow, so elsewhere they skip with the reason.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NDList, Tensor } from '@kiln/core';
import { checkEngine, tfjsAffineModel, tfjsConformanceFixtures } from '@kiln/testing';
import { describeEngineConformance } from '@kiln/testing/conformance';
import {
  TF_INTER_OP_ENV,
  TF_INTRA_OP_ENV,
  createTensorFlowEngine,
  probeTensorFlow,
} from './index.js';
import { loadRequest, temporaryFolder } from './test-support/requests.js';

const availability = await checkEngine('TensorFlow/tfjs-node', () => probeTensorFlow('tfjs-node'));

if (availability.run) {
  // No providerModule: the worker-thread test would load tfjs-node in a second thread, which
  // its addon does not support (one thread per process).
  await describeEngineConformance({
    engineName: 'TensorFlow',
    provider: createTensorFlowEngine({
      backend: 'tfjs-node',
      intraOpThreads: 1,
      interOpThreads: 1,
    }),
    fixtures: tfjsConformanceFixtures,
    dtypes: ['float32', 'int32', 'bool', 'string'],
    probe: () => Promise.resolve(null),
  });
}

describe.skipIf(!availability.run)('tfjs-node backend', () => {
  const tmp = temporaryFolder('tfjs-node');
  afterAll(tmp.remove);

  it('runs native TensorFlow in one shared thread with the thread settings given', async () => {
    const engine = await createTensorFlowEngine({
      backend: 'tfjs-node',
      intraOpThreads: 1,
      interOpThreads: 1,
    }).load();
    expect(engine.describe()).toMatchObject({
      backend: 'tfjs-node',
      native: true,
      multithreaded: true,
      models: expect.stringContaining('one shared TensorFlow thread'),
      threads: { intraOpThreads: 1, interOpThreads: 1 },
    });
    expect(process.env[TF_INTRA_OP_ENV]).toBe('1');
    expect(process.env[TF_INTER_OP_ENV]).toBe('1');

    const fixture = await tfjsAffineModel(fs.mkdtempSync(path.join(tmp.dir, 'affine-')));
    const model = await engine.loadModel(loadRequest(fixture.dir));
    const contexts = await Promise.all([model.newExecutionContext(), model.newExecutionContext()]);
    const outputs = await Promise.all(
      contexts.map((c, i) =>
        c.forward(NDList.of(new Tensor('float32', Float32Array.from([i, 1, 0, 0]), [1, 4], 'x'))),
      ),
    );
    expect(Array.from(outputs[1]!.get('y').data as Float32Array)).toEqual([
      expect.closeTo(0.5 + 1.5 + 0.1, 5),
      expect.closeTo(-1 + 0.25 - 0.2, 5),
    ]);
    await model.dispose();
  });

  const python = availability.run ? savedModelPython() : undefined;
  it.skipIf(python === undefined)(
    'loads a SavedModel by tags and signature (option.tags, option.signature)',
    async () => {
      const dir = path.join(tmp.dir, 'saved-model');
      execFileSync(python!, ['-c', SAVED_MODEL_SCRIPT, dir], { stdio: 'inherit' });
      const engine = await createTensorFlowEngine({ backend: 'tfjs-node' }).load();
      const x = NDList.of(new Tensor('float32', Float32Array.from([1, 2, 3]), [3], 'x'));

      const byDefault = await engine.loadModel(loadRequest(dir));
      expect(byDefault.inputs).toEqual([{ name: 'x', dtype: 'float32', shape: [-1] }]);
      const y = (await (await byDefault.newExecutionContext()).forward(x)).get('y');
      expect(Array.from(y.data as Float32Array)).toEqual([3, 5, 7]);

      const doubled = await engine.loadModel(
        loadRequest(dir, { tags: 'serve', signature: 'double' }),
      );
      const z = (await (await doubled.newExecutionContext()).forward(x)).get('z');
      expect(Array.from(z.data as Float32Array)).toEqual([2, 4, 6]);

      await expect(
        engine.loadModel(loadRequest(dir, { signature: 'missing' })),
      ).rejects.toMatchObject({
        code: 'MODEL_LOAD_FAILED',
        message: expect.stringContaining('serving_default'),
      });
      await expect(engine.loadModel(loadRequest(dir, { tags: 'train' }))).rejects.toMatchObject({
        code: 'MODEL_LOAD_FAILED',
      });
      await Promise.all([byDefault.dispose(), doubled.dispose()]);
    },
  );
});

/** Writes a SavedModel with signatures serving_default (x → y = 2x + 1) and double (x → z = 2x). */
const SAVED_MODEL_SCRIPT = `
import sys, tensorflow as tf
class M(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name='x')])
    def affine(self, x):
        return {'y': 2.0 * x + 1.0}
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name='x')])
    def double(self, x):
        return {'z': 2.0 * x}
m = M()
tf.saved_model.save(m, sys.argv[1], signatures={'serving_default': m.affine, 'double': m.double})
`;

/** A Python that has TensorFlow (to write a SavedModel), or undefined. */
function savedModelPython(): string | undefined {
  for (const python of ['python3', '/usr/bin/python3']) {
    try {
      execFileSync(python, ['-c', 'import tensorflow'], { stdio: 'ignore' });
      return python;
    } catch {
      // try the next one
    }
  }
  console.warn('[kiln] skipping the SavedModel test: no Python with TensorFlow to write one');
  return undefined;
}
