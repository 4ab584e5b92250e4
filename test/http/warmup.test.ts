// warmup_batch_sizes: before a model is READY each worker runs it at those batch sizes on
// zeros shaped as its inputs, and /ping says PENDING meanwhile. The test engine writes down
// every forward's batch size, and holds its forwards until a gate file exists.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  capturingLogger,
  expectCleanError,
  jsonOf,
  sleep,
  startTestServer,
  tempDir,
  type TestServer,
} from '../support/server-harness.js';
import { COUNTER_FILE } from '../support/warmup-counter-engine.js';

const ENGINE = pathToFileURL(path.resolve('support/warmup-counter-engine.ts')).href;
const root = tempDir('warmup');
let server: TestServer | undefined;

afterEach(async () => {
  await server?.stop();
  server = undefined;
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/** A counter model folder; its forwards are logged to `<dir>/forwards`. */
function counterModel(name: string, properties: string): { dir: string; forwards: () => string[] } {
  const dir = path.join(root, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, COUNTER_FILE), '');
  const log = path.join(dir, 'forwards');
  fs.writeFileSync(
    path.join(dir, 'serving.properties'),
    `engine=WarmupCounter\noption.forwardLog=${log}\n${properties}`,
  );
  return {
    dir,
    forwards: () =>
      fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean) : [],
  };
}

async function ping(): Promise<{ status: number; body: Record<string, { status: string }> }> {
  const { status, body } = await jsonOf(await fetch(`${server!.inference}/ping`));
  return { status, body: body as Record<string, { status: string }> };
}

async function describeWorkers(name: string): Promise<{ warmup: unknown }[]> {
  const [model] = (await jsonOf(await server!.manage(`/models/${name}`))).body as {
    workerGroups: { workers: { warmup: unknown }[] }[];
  }[];
  return model!.workerGroups.flatMap((g) => g.workers);
}

describe('warm-up before a model is ready', () => {
  it('runs warmup_batch_sizes=1,4 on every worker before READY; /ping says PENDING until then', async () => {
    const gate = path.join(root, 'gate');
    const model = counterModel(
      'gated',
      `warmup_batch_sizes=1,4\noption.gateFile=${gate}\nminWorkers=2\nmaxWorkers=2\n`,
    );
    const { logger, lines } = capturingLogger();
    server = await startTestServer({ models: [`m=${model.dir}`], engineModules: [ENGINE], logger });
    // Registered and loading: held in its warm-up, it stays PENDING however long we look.
    for (let i = 0; i < 200 && server.server.models.list().length === 0; i++) await sleep(10);
    for (let i = 0; i < 5; i++) {
      expect(await ping()).toEqual({ status: 503, body: { m: { status: 'PENDING' } } });
      await sleep(20);
    }
    expect(model.forwards()).toEqual([]);
    fs.writeFileSync(gate, '');
    await server.settled();
    expect(await ping()).toEqual({ status: 200, body: { m: { status: 'Healthy' } } });
    // Two workers, each at batch 1 then 4, before any request.
    expect(model.forwards().sort()).toEqual(['1', '1', '4', '4']);
    const workers = await describeWorkers('m');
    expect(workers).toHaveLength(2);
    for (const worker of workers)
      expect(worker.warmup).toEqual({ batchSizes: [1, 4], ms: expect.any(Number) });
    expect(lines.some((l) => /model m warmed up at batch sizes 1, 4/.test(String(l.msg)))).toBe(
      true,
    );
  });

  it('runs batch 1 and the batch size by default: batch_size, or auto_batch_size when adaptive', async () => {
    const fixed = counterModel('fixed', 'batch_size=8\n');
    const adaptive = counterModel('adaptive', '');
    server = await startTestServer({
      models: [`fixed=${fixed.dir}`, `adaptive=${adaptive.dir}`],
      config: { auto_batch_size: '16' },
      engineModules: [ENGINE],
    });
    await server.settled();
    // A cheap model's first run at 1 tells the larger size is cheap enough to run; on a busy
    // machine that run may take long enough for batches of 1 and 2 to be timed first.
    expect([
      ['1', '8'],
      ['1', '1', '2', '8'],
    ]).toContainEqual(fixed.forwards());
    expect([
      ['1', '16'],
      ['1', '1', '2', '16'],
    ]).toContainEqual(adaptive.forwards());
  });

  it('takes the server-wide warmup_batch_sizes of config.properties; none turns it off', async () => {
    const byServer = counterModel('by-server', '');
    const off = counterModel('off', 'warmup_batch_sizes=none\n');
    server = await startTestServer({
      models: [`s=${byServer.dir}`, `o=${off.dir}`],
      config: { warmup_batch_sizes: '2,3' },
      engineModules: [ENGINE],
    });
    await server.settled();
    expect(byServer.forwards()).toEqual(['2', '3']);
    expect(off.forwards()).toEqual([]);
  });

  it('shapes warm-up requests by warmup_shape; one that does not fit skips warm-up, logged, and the model loads', async () => {
    const rows = counterModel('rows', 'warmup_batch_sizes=1,4\nwarmup_shape=2,3\n');
    const misfit = counterModel('misfit', 'warmup_shape=1,5\n');
    const { logger, lines } = capturingLogger();
    server = await startTestServer({
      models: [`rows=${rows.dir}`, `misfit=${misfit.dir}`],
      engineModules: [ENGINE],
      logger,
    });
    await server.settled();
    // A request of 2 rows, 1 and 4 of them in a batch.
    expect(rows.forwards()).toEqual(['2', '8']);
    expect(misfit.forwards()).toEqual([]);
    expect((await ping()).status).toBe(200);
    const [worker] = await describeWorkers('misfit');
    expect(worker!.warmup).toEqual({
      skipped: 'warmup_shape 1,5 does not fit input x [-1,3]',
    });
    expect(
      lines.some((l) => /model misfit: warm-up skipped: warmup_shape 1,5/.test(String(l.msg))),
    ).toBe(true);
  });

  it.each(['0', '-1', 'a', '1,,2'])(
    'refuses warmup_batch_sizes=%s when the model is registered, naming the key',
    async (value) => {
      const store = tempDir('warmup-store');
      try {
        const name = `bad${['0', '-1', 'a', '1,,2'].indexOf(value)}`;
        const model = path.join(store, name);
        fs.mkdirSync(model);
        fs.writeFileSync(path.join(model, COUNTER_FILE), '');
        fs.writeFileSync(
          path.join(model, 'serving.properties'),
          `engine=WarmupCounter\nwarmup_batch_sizes=${value}\n`,
        );
        server = await startTestServer({ config: { model_store: store }, engineModules: [ENGINE] });
        const { status, body } = await jsonOf(
          await server.manage(`/models?url=${name}&synchronous=true`, { method: 'POST' }),
        );
        expect(status).toBe(400);
        const text = expectCleanError(body);
        expect(text).toMatch(/warmup_batch_sizes=.*is not a batch size \(integers ≥ 1/);
      } finally {
        fs.rmSync(store, { recursive: true, force: true });
      }
    },
  );
});
