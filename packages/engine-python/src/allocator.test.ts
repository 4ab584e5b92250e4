import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import {
  KilnErrorCode,
  PRELOADED_ALLOCATOR_ENV,
  findAllocatorLibrary,
  type ServingContext,
} from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { probePython } from './probe.js';
import { TEST_PYTHON, loadTestModel, removeTestModels } from './test-support.js';

// option.allocator: the worker process runs with jemalloc or tcmalloc preloaded, which its
// /proc/<pid>/maps shows mapped, or with glibc's malloc.
const PYTHON = TEST_PYTHON;
const { run } = await checkEngine('Python', () => probePython(PYTHON));
const installed = (allocator: 'jemalloc' | 'tcmalloc') => {
  try {
    return findAllocatorLibrary(allocator) !== '';
  } catch {
    return false;
  }
};

const HANDLER = `
import os
from djl_python import Output

def handle(inputs):
    if inputs.is_empty():
        return None
    return Output().add(str(os.getpid()))
`;

afterAll(removeTestModels);
const load = (options: Record<string, string>, properties = '') =>
  loadTestModel(HANDLER, options, properties);

/** The libraries mapped into the process of the context's worker. */
async function workerMaps(context: ServingContext): Promise<string> {
  const [result] = await context.serve([{ body: new TextEncoder().encode('pid') }]);
  if (!result?.ok || result.value.type !== 'bytes') throw new Error('no pid answered');
  const pid = Buffer.from(result.value.body).toString();
  return readFileSync(`/proc/${pid}/maps`, 'utf8');
}

describe.skipIf(!run || process.platform !== 'linux')('Python workers’ allocator', () => {
  it.skipIf(!installed('jemalloc'))(
    'maps libjemalloc into the worker with option.allocator=jemalloc',
    async () => {
      const model = await load({ allocator: 'jemalloc' });
      const context = await model.newServingContext();
      const maps = await workerMaps(context);
      expect(maps).toMatch(/libjemalloc\.so\.2/);
      expect(model.describe()).toMatchObject({ allocator: 'jemalloc' });
      await model.dispose();
    },
    60_000,
  );

  it.skipIf(!installed('tcmalloc'))(
    "takes the server's allocator from the model's properties (tcmalloc)",
    async () => {
      const model = await load({}, 'allocator=tcmalloc');
      const context = await model.newServingContext();
      expect(await workerMaps(context)).toMatch(/libtcmalloc_minimal\.so\.4/);
      await model.dispose();
    },
    60_000,
  );

  it.skipIf(!installed('jemalloc'))(
    'option.allocator=default leaves out the allocator Kiln preloaded into the server',
    async () => {
      const library = findAllocatorLibrary('jemalloc');
      const saved = { ...process.env };
      // As `kiln serve` runs with cpu_launcher_args=--enable_jemalloc.
      process.env.LD_PRELOAD = library;
      process.env[PRELOADED_ALLOCATOR_ENV] = library;
      try {
        const model = await load({ allocator: 'default' }, 'allocator=jemalloc');
        const context = await model.newServingContext();
        const maps = await workerMaps(context);
        expect(maps).not.toMatch(/libjemalloc/);
        expect(maps).not.toMatch(/libtcmalloc/);
        await model.dispose();
      } finally {
        process.env.LD_PRELOAD = saved.LD_PRELOAD;
        process.env[PRELOADED_ALLOCATOR_ENV] = saved[PRELOADED_ALLOCATOR_ENV];
        if (saved.LD_PRELOAD === undefined) delete process.env.LD_PRELOAD;
        if (saved[PRELOADED_ALLOCATOR_ENV] === undefined)
          delete process.env[PRELOADED_ALLOCATOR_ENV];
      }
    },
    60_000,
  );

  it('refuses an allocator it does not know, naming the key', async () => {
    await expect(load({ allocator: 'mimalloc' })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
      message: expect.stringMatching(
        /option\.allocator must be one of jemalloc, tcmalloc, default/,
      ) as unknown,
    });
  });
});
