import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { probeOrt } from '@kiln/engine-onnxruntime';
import { tinyModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerPool } from './create-worker-pool.js';
import { endSpareHostThreads, prestartHostThread, spareHostThreads } from './prestart.js';
import { LOAD_GATE } from './test-fixtures/async-scale-engine.js';
import { ASYNC_SCALE_ENGINE_MODULE, writeScaleModel } from './test-fixtures/scale-model-folder.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

describe.skipIf(!run)('a host thread started ahead of need', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-pool-spare-'));
    await tinyModel(dir);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const threadPool = (onLocated?: () => void) =>
    createWorkerPool({
      model: { url: dir, engines: ['@kiln/engine-onnxruntime'] },
      settings: { cores: 2, minWorkers: 1, maxWorkers: 1, placement: 'thread' },
      ...(onLocated ? { onLocated } : {}),
    });

  it("is the thread a pool's first worker runs on, located before it is ready", async () => {
    const spare = prestartHostThread();
    expect(spareHostThreads()).toBe(1);
    const events: string[] = [];
    const pool = await threadPool(() => events.push('located'));
    events.push('ready');
    try {
      expect(pool.describe().workerGroups[0]!.workers[0]!.threadId).toBe(spare);
      expect(spareHostThreads()).toBe(0);
      expect(events).toEqual(['located', 'ready']);
    } finally {
      await pool.shutdown();
    }
  });

  it("loads the hinted model's engine while it waits, and its worker serves", async () => {
    const spare = prestartHostThread({ preloadModels: [dir] });
    // Time for the thread to start and load ONNX Runtime before the pool asks for it.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const pool = await threadPool();
    try {
      const worker = pool.describe().workerGroups[0]!.workers[0]!;
      expect(worker.threadId).toBe(spare);
      expect(worker.model).toMatchObject({ engine: 'OnnxRuntime' });
    } finally {
      await pool.shutdown();
    }
  });

  it('ends when no worker took it in time, and the next worker starts a thread of its own', async () => {
    const spare = prestartHostThread({ endAfterMs: 50 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const pool = await threadPool();
    try {
      expect(pool.describe().workerGroups[0]!.workers[0]!.threadId).not.toBe(spare);
    } finally {
      await pool.shutdown();
    }
  });

  it('ends when the process turns out to need none', async () => {
    const spare = prestartHostThread();
    endSpareHostThreads();
    const pool = await threadPool();
    try {
      expect(pool.describe().workerGroups[0]!.workers[0]!.threadId).not.toBe(spare);
    } finally {
      await pool.shutdown();
    }
  });
});

describe('a pool over an engine that loads on the calling thread', () => {
  it('calls onLocated before its model loads', async () => {
    const dir = await writeScaleModel(2, { engine: 'TestAsyncScale' });
    let open!: () => void;
    const gates = globalThis as { [LOAD_GATE]?: Promise<void> };
    gates[LOAD_GATE] = new Promise((resolve) => (open = resolve));
    const events: string[] = [];
    try {
      const creating = createWorkerPool({
        model: { url: dir, engines: [ASYNC_SCALE_ENGINE_MODULE] },
        onLocated: () => events.push('located'),
      });
      // The load waits for the gate: only locating the model can have happened.
      for (let i = 0; i < 500 && events.length === 0; i++)
        await new Promise((resolve) => setTimeout(resolve, 10));
      expect(events).toEqual(['located']);
      open();
      const pool = await creating;
      await pool.shutdown();
    } finally {
      open();
      delete gates[LOAD_GATE];
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** A process that starts a spare and does nothing else. */
const SPARE_ONLY = fileURLToPath(new URL('./test-fixtures/spare-only.ts', import.meta.url));

describe('a spare host thread', () => {
  it('does not keep the process alive', async () => {
    // A referenced spare would hold its process for its 10 minutes: the timeout would kill it
    // and the call fail.
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['-C', '@kiln/source', '--import', 'tsx', SPARE_ONLY],
      { timeout: 20_000 },
    );
    expect(Number(stdout)).toBeGreaterThan(0);
  }, 30_000);
});
