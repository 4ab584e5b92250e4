// worker_nice as configuration: config.properties sets how much nicer than the server models'
// thread workers run, and a model's serving.properties overrides it; describe-model shows
// the niceness each worker thread runs at (Linux, where a thread's priority is its own).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NDList, Tensor, encodeNpz } from '@kiln/core';
import { addMulModel } from '@kiln/model-tools';
import { jsonOf, startTestServer, tempDir, type TestServer } from '../support/server-harness.js';

describe.skipIf(process.platform !== 'linux')('worker_nice', () => {
  let dir: string;
  let server: TestServer;

  beforeAll(async () => {
    dir = tempDir('worker-nice');
    const byConfig = await addMulModel(path.join(dir, 'by-config'));
    const own = await addMulModel(path.join(dir, 'own'));
    fs.appendFileSync(path.join(own, 'serving.properties'), '\nworker_nice=0\n');
    server = await startTestServer({
      models: [`byconfig=${byConfig}`, `own=${own}`],
      config: { placement: 'thread', worker_nice: '2' },
    });
    await server.settled();
  });
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function niceOf(model: string): Promise<(number | undefined)[]> {
    const [description] = (await jsonOf(await server.manage(`/models/${model}`))).body as {
      workerGroups: { workers: { kind: string; nice?: number; niceError?: string }[] }[];
    }[];
    const workers = description!.workerGroups.flatMap((g) => g.workers);
    expect(workers.map((w) => [w.kind, w.niceError])).toEqual(
      workers.map(() => ['thread', undefined]),
    );
    return workers.map((w) => w.nice);
  }

  it("runs a model's thread workers as config.properties says", async () => {
    expect(await niceOf('byconfig')).toEqual([Math.min(19, os.getPriority() + 2)]);
  });

  it("lets a model's serving.properties override it (0: as the server)", async () => {
    expect(await niceOf('own')).toEqual([undefined]);
  });

  it('answers the same either way', async () => {
    for (const model of ['byconfig', 'own']) {
      const response = await fetch(`${server.inference}/predictions/${model}`, {
        method: 'POST',
        headers: { accept: 'application/json' },
        body: encodeNpz(
          NDList.of(
            new Tensor('float32', Float32Array.of(1, 2, 3), [1, 3], 'a'),
            new Tensor('float32', Float32Array.of(2, 2, 2), [1, 3], 'b'),
          ),
        ),
      });
      expect(response.status, model).toBe(200);
      expect(await response.json(), model).toMatchObject([
        { name: 'sum', data: [3, 4, 5] },
        { name: 'product', data: [2, 4, 6] },
      ]);
    }
  });
});
