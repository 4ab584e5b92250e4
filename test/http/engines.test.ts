import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIBRARY_ENV } from '@kiln/dlr-native';
import { buildConformanceLibrary } from '@kiln/dlr-native/conformance-library';
import { probeDlr } from '@kiln/engine-dlr';
import { saveScriptModule, probeLibTorch } from '@kiln/engine-libtorch';
import { probeTensorFlow } from '@kiln/engine-tensorflow';
import {
  type ConformanceFixtures,
  checkEngine,
  dlrConformanceFixtures,
  onnxConformanceFixtures,
  tfjsConformanceFixtures,
  torchscriptConformanceFixtures,
} from '@kiln/testing';
import { type TestServer, jsonOf, startTestServer, tempDir } from '../support/server-harness.js';

// Every engine behind the same server: one affine model each, served over HTTP.
if (!process.env[LIBRARY_ENV]) {
  try {
    process.env[LIBRARY_ENV] = await buildConformanceLibrary();
  } catch (error) {
    console.warn(`[kiln] cannot build the DLR conformance library: ${(error as Error).message}`);
  }
}

const ENGINES: {
  name: string;
  fixtures: ConformanceFixtures;
  probe: () => Promise<string | null>;
}[] = [
  { name: 'OnnxRuntime', fixtures: onnxConformanceFixtures, probe: async () => null },
  {
    name: 'PyTorch',
    fixtures: torchscriptConformanceFixtures(saveScriptModule),
    probe: probeLibTorch,
  },
  { name: 'TensorFlow', fixtures: tfjsConformanceFixtures, probe: () => probeTensorFlow() },
  { name: 'DLR', fixtures: dlrConformanceFixtures, probe: probeDlr },
];
const available: typeof ENGINES = [];
for (const engine of ENGINES)
  if ((await checkEngine(engine.name, engine.probe)).run) available.push(engine);

let t: TestServer;
let root: string;
const models: Record<string, { weights: number[][]; bias: number[] }> = {};

beforeAll(async () => {
  root = tempDir('engines');
  const urls: string[] = [];
  for (const engine of available) {
    const name = engine.name.toLowerCase();
    fs.mkdirSync(path.join(root, name));
    const fixture = await engine.fixtures.affine(path.join(root, name));
    models[engine.name] = fixture;
    urls.push(`${name}::${engine.name}=${fixture.dir}`);
  }
  t = await startTestServer({ models: urls });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

describe.each(available.map((e) => e.name))('%s behind the server', (engineName) => {
  const name = engineName.toLowerCase();
  const x = [1, 2, 3, 4, -1, 0.5, 0, 2];
  const expected = () => {
    const { weights, bias } = models[engineName]!;
    return [0, 1].flatMap((r) =>
      bias.map((b, c) => b + [0, 1, 2, 3].reduce((s, k) => s + x[r * 4 + k]! * weights[k]![c]!, 0)),
    );
  };

  it('is healthy and describes its model', async () => {
    expect(
      (
        (await jsonOf(await fetch(`${t.inference}/ping`))).body as Record<
          string,
          { status: string }
        >
      )[name],
    ).toEqual({ status: 'Healthy' });
    const { status, body } = await jsonOf(await t.manage(`/models/${name}`));
    expect(status).toBe(200);
    expect((body as { engine: string }[])[0]!.engine).toBe(engineName);
  });

  it('warmed every worker up at batch 1, and at the adaptive batch size unless that costs too much, before it was ready', async () => {
    const [model] = (await jsonOf(await t.manage(`/models/${name}`))).body as {
      workerGroups: { workers: { warmup: { batchSizes: number[]; leftOut?: string } }[] }[];
    }[];
    const workers = model!.workerGroups.flatMap((g) => g.workers);
    expect(workers.length).toBeGreaterThan(0);
    for (const { warmup } of workers) {
      // A batch of 32 expected to take over 250 ms is left out, saying so.
      if (warmup.leftOut)
        expect(warmup).toEqual({
          batchSizes: [1],
          ms: expect.any(Number),
          leftOut: expect.stringMatching(/^batch size 32 would take about \d+ ms/),
        });
      else expect(warmup).toEqual({ batchSizes: [1, 32], ms: expect.any(Number) });
    }
  });

  it('answers v2 inference with the right numbers', async () => {
    const response = await fetch(`${t.inference}/v2/models/${name}/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [2, 4], datatype: 'FP32', data: x }] }),
    });
    const { status, body } = await jsonOf(response);
    expect(status).toBe(200);
    const [y] = (body as { outputs: { shape: number[]; data: number[] }[] }).outputs;
    expect(y!.shape).toEqual([2, 2]);
    y!.data.forEach((v, i) => expect(v).toBeCloseTo(expected()[i]!, 4));
  });

  it('batches concurrent /predictions requests and answers each caller', async () => {
    const replies = await Promise.all(
      Array.from({ length: 24 }, async (_, i) => {
        const row = [i, 1, -i, 0.5];
        const response = await fetch(`${t.inference}/predictions/${name}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({
            inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP32', data: row }],
          }),
        });
        expect(response.status).toBe(200);
        const [y] = (await response.json()) as { data: number[] }[];
        return { row, y: y!.data };
      }),
    );
    const { weights, bias } = models[engineName]!;
    for (const { row, y } of replies) {
      bias.forEach((b, c) =>
        expect(y[c]).toBeCloseTo(b + row.reduce((s, v, k) => s + v * weights[k]![c]!, 0), 4),
      );
    }
  });
});
