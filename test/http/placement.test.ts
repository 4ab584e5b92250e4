// Where the server runs a model of a blocking engine (ONNX Runtime) with placement=auto (the
// server's default is thread): a tiny model timed under the inline limit runs on the main
// thread, one over it on worker threads; describe-model and the "model ready" log line say
// which and why, and the answers are the same either way.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NDList, Tensor, encodeNpz } from '@kiln/core';
import { addMulModel } from '@kiln/model-tools';
import {
  capturingLogger,
  jsonOf,
  startTestServer,
  tempDir,
  type TestServer,
} from '../support/server-harness.js';

describe('placement of a tiny ONNX model', () => {
  let dir: string;
  let inline: TestServer;
  let threads: TestServer;
  const { logger, lines: logLines } = capturingLogger();

  beforeAll(async () => {
    dir = tempDir('placement');
    const model = await addMulModel(path.join(dir, 'addmul'));
    // A limit no run exceeds, and one every run exceeds: auto decides from the timing.
    inline = await startTestServer({
      models: [`m=${model}`],
      config: { placement: 'auto', inline_forward_limit_us: '100000000' },
      logger,
    });
    threads = await startTestServer({
      models: [`m=${model}`],
      config: { placement: 'auto', inline_forward_limit_us: '0' },
    });
    await Promise.all([inline.settled(), threads.settled()]);
  });
  afterAll(async () => {
    await Promise.all([inline?.stop(), threads?.stop()]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('describes where each model runs and why', async () => {
    const [onMain] = (await jsonOf(await inline.manage('/models/m'))).body as {
      placement: { kind: string; reason: string; probe: { batch: number; bestUs: number } };
      workerGroups: { workers: { kind: string }[] }[];
    }[];
    expect(onMain!.placement).toMatchObject({
      kind: 'inline',
      reason: expect.stringMatching(/^a batch of \d+ took \d+ µs at best/),
      probe: { batch: expect.any(Number), bestUs: expect.any(Number) },
    });
    expect(onMain!.workerGroups[0]!.workers.map((w) => w.kind)).toEqual(['inline']);
    const [onThreads] = (await jsonOf(await threads.manage('/models/m'))).body as {
      placement: { kind: string; reason: string };
    }[];
    expect(onThreads!.placement).toMatchObject({
      kind: 'thread',
      reason: expect.stringContaining('(inline limit 0 µs)'),
    });
    await waitFor(() => logLines.some((l) => l.msg === 'model ready'));
    expect(logLines.find((l) => l.msg === 'model ready')).toMatchObject({
      model: 'm',
      placement: 'inline',
      placementReason: expect.stringMatching(/µs at best .* on a thread/),
    });
  });

  it('answers the same inline and on threads, also under concurrent load', async () => {
    const ask = (server: TestServer, i: number) =>
      fetch(`${server.inference}/predictions/m`, {
        method: 'POST',
        headers: { accept: 'application/json' },
        body: encodeNpz(
          NDList.of(
            new Tensor('float32', Float32Array.of(i, 1, 2), [1, 3], 'a'),
            new Tensor('float32', Float32Array.of(2, 2, 2), [1, 3], 'b'),
          ),
        ),
      }).then(async (r) => ({ status: r.status, body: await r.text() }));
    const count = 48;
    const [fromMain, fromThreads] = await Promise.all([
      Promise.all(Array.from({ length: count }, (_, i) => ask(inline, i))),
      Promise.all(Array.from({ length: count }, (_, i) => ask(threads, i))),
    ]);
    expect(JSON.parse(fromMain[5]!.body)).toMatchObject([
      { name: 'sum', data: [7, 3, 4] },
      { name: 'product', data: [10, 2, 4] },
    ]);
    for (let i = 0; i < count; i++) {
      expect(fromMain[i]!.status).toBe(200);
      expect(fromMain[i]!.body).toBe(fromThreads[i]!.body);
    }
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
}
