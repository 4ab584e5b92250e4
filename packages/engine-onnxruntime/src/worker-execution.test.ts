import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { CPU, NDList, Tensor, spawnModuleWorker } from '@kiln/core';
import { slowModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrtExecutionContext } from './ort-execution-context.js';
import type { OrtModel } from './ort-model.js';
import { probeOrt } from './ort-probe.js';
import { parseSessionConfig } from './session-config.js';
import { loadOrtModel } from './test-support/load.js';
import { SESSION_WORKER_MODULE, WorkerSessionHost } from './worker-session-host.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

const input = () => NDList.of(new Tensor('float32', Float32Array.of(1, 2, 3, 4), [1, 4], 'x'));

/** Wall time of one forward, and the longest the event loop went without a 2 ms timer tick. */
async function timedForward(
  forward: () => Promise<unknown>,
): Promise<{ runMs: number; maxLagMs: number }> {
  let last = performance.now();
  let maxLagMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    maxLagMs = Math.max(maxLagMs, now - last);
    last = now;
  }, 2);
  const start = performance.now();
  await forward();
  const runMs = performance.now() - start;
  clearInterval(timer);
  return { runMs, maxLagMs: Math.max(maxLagMs, performance.now() - last) };
}

let root: string;
let slowDir: string;
let model: OrtModel;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-ort-worker-'));
  slowDir = (await slowModel(join(root, 'slow'), 250)).dir;
  if (run) model = await loadOrtModel(slowDir);
});
afterAll(async () => {
  await model?.dispose();
  await rm(root, { recursive: true, force: true });
});

describe.skipIf(!run)('sessions on worker threads', () => {
  it('keeps the event loop free while a slow model runs, unlike running on the calling thread', async () => {
    const context = await model.newExecutionContext({ intraOpThreads: 1 });
    await context.forward(input());
    const worker = await timedForward(() => context.forward(input()));
    expect(worker.runMs).toBeGreaterThan(50);
    expect(worker.maxLagMs / worker.runMs).toBeLessThan(0.25);

    // The same model on the calling thread blocks the loop for the whole run.
    const blocking = await loadOrtModel(
      slowDir,
      { intraOpNumThreads: '1' },
      { sessionThread: 'calling' },
    );
    const inline = await blocking.newExecutionContext();
    await inline.forward(input());
    const calling = await timedForward(() => inline.forward(input()));
    expect(calling.maxLagMs / calling.runMs).toBeGreaterThan(0.6);
    await blocking.dispose();
  });

  it.skipIf(availableParallelism() < 2)(
    'runs two contexts at the same time, not one after the other',
    async () => {
      const [a, b] = await Promise.all([
        model.newExecutionContext({ intraOpThreads: 1 }),
        model.newExecutionContext({ intraOpThreads: 1 }),
      ]);
      await Promise.all([a.forward(input()), b.forward(input())]);
      const start = performance.now();
      await Promise.all([a.forward(input()), b.forward(input())]);
      const wallMs = performance.now() - start;
      const [ra, rb] = [a.lastRun!, b.lastRun!];
      const overlapMs =
        Math.min(ra.startedAt + ra.runMs, rb.startedAt + rb.runMs) -
        Math.max(ra.startedAt, rb.startedAt);
      expect(overlapMs / Math.min(ra.runMs, rb.runMs)).toBeGreaterThan(0.5);
      // Serialised runs would take the sum of both; overlapping ones about the longer one. Each
      // run's own time stretches with the machine's load, so this holds on a busy machine too.
      expect(wallMs / Math.max(ra.runMs, rb.runMs)).toBeLessThan(1.5);
    },
  );

  it('serialises forwards on one context and closes after the running one', async () => {
    const context = await model.newExecutionContext({ intraOpThreads: 1 });
    const first = context.forward(input());
    const second = context.forward(input());
    const closed = context.close();
    const late = expect(context.forward(input())).rejects.toMatchObject({ code: 'CLOSED' });
    await expect(first).resolves.toBeInstanceOf(NDList);
    await expect(second).resolves.toBeInstanceOf(NDList);
    await late;
    await closed;
    expect(context.completedRuns).toBe(2);
  });

  it('fails a pending call with WORKER_CRASHED when the session thread dies mid-run', async () => {
    const worker = spawnModuleWorker(
      new URL('./test-support/crashing-session-worker.ts', import.meta.url),
    );
    const context = new OrtExecutionContext(await WorkerSessionHost.attach(worker), 'worker');
    await expect(context.forward(input())).rejects.toMatchObject({
      code: 'WORKER_CRASHED',
      message: expect.stringMatching(/exited unexpectedly with code 3/),
    });
    await expect(context.forward(input())).rejects.toMatchObject({ code: 'WORKER_CRASHED' });
    await context.close();
  });

  it('fails later calls with WORKER_CRASHED when an idle session thread is gone', async () => {
    const config = parseSessionConfig({ intraOpNumThreads: '1' }, CPU);
    const worker = spawnModuleWorker(SESSION_WORKER_MODULE, {
      workerData: { modelPath: join(slowDir, 'model.onnx'), config },
    });
    const context = new OrtExecutionContext(await WorkerSessionHost.attach(worker), 'worker');
    await context.forward(input());
    // Only while idle: ending the thread inside a native run aborts the whole process.
    await worker.terminate();
    await expect(context.forward(input())).rejects.toMatchObject({ code: 'WORKER_CRASHED' });
    await context.close();
  });

  it('reports a session worker that fails to start', async () => {
    const worker = spawnModuleWorker(new URL('./test-support/no-such-module.ts', import.meta.url));
    await expect(WorkerSessionHost.attach(worker)).rejects.toMatchObject({
      code: 'WORKER_CRASHED',
      message: expect.stringMatching(/while starting: .*no-such-module/),
    });
  });
});
