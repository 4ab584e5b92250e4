import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NDList, Tensor, encodeNpz } from '@kiln/core';
import { collectGarbage, residentBytes } from '@kiln/testing';
import { buildModelStore } from '../support/fixtures.js';
import { type TestServer, sleep, startTestServer, tempDir } from '../support/server-harness.js';

let t: TestServer;
let root: string;

beforeAll(async () => {
  root = tempDir('load');
  const store = await buildModelStore(path.join(root, 'store'));
  fs.appendFileSync(
    path.join(store.addMul, 'serving.properties'),
    'job_queue_size=100000\n# Fixed workers: a worker started mid-run would be growth that is not a leak.\nminWorkers=2\nmaxWorkers=2\n',
  );
  t = await startTestServer({ models: [`addmul=${store.addMul}`] });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

/**
 * Memory after garbage collection, so that the check measures leaks rather than GC timing: the
 * JavaScript heap, which a leak of requests, jobs or buffers' wrappers grows exactly, and the
 * resident size, which malloc's arenas also move by a few percent either way.
 */
async function settledMemory(): Promise<{ heap: number; rss: number }> {
  await sleep(200);
  // Full collections with turns between them, so that buffers' native memory is freed too.
  await collectGarbage();
  return { heap: process.memoryUsage().heapUsed, rss: await residentBytes() };
}

/** Runs `total` requests at `concurrency`, each checking that it got its own answer. */
async function run(total: number, concurrency: number): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  let next = 0;
  const client = async () => {
    while (next < total) {
      const i = next++;
      const a = new Float32Array([i, i + 1, i + 2]);
      const b = new Float32Array([2, 2, 2]);
      const body = Buffer.from(
        encodeNpz(
          NDList.of(new Tensor('float32', a, [1, 3], 'a'), new Tensor('float32', b, [1, 3], 'b')),
        ),
      );
      const response = await fetch(`${t.inference}/predictions/addmul`, {
        method: 'POST',
        body,
        headers: { accept: 'application/json' },
      });
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      if (response.status === 200) {
        const [sum] = (await response.json()) as { data: number[] }[];
        expect(sum!.data).toEqual([i + 2, i + 3, i + 4]);
      } else {
        await response.arrayBuffer();
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
  return statuses;
}

describe('load', () => {
  it(
    'serves 2 × 3000 requests at concurrency 64 with no failure and flat memory',
    { timeout: 240_000 },
    async () => {
      const warmUp = await run(2000, 64);
      expect([...warmUp.keys()]).toEqual([200]);
      const afterWarmUp = await settledMemory();
      const first = await run(3000, 64);
      const middle = await settledMemory();
      const second = await run(3000, 64);
      expect(Object.fromEntries(first)).toEqual({ 200: 3000 });
      expect(Object.fromEntries(second)).toEqual({ 200: 3000 });
      const after = await settledMemory();
      expect(after.heap / afterWarmUp.heap).toBeLessThan(1.1);
      // Resident size settles later than the heap (malloc arenas, V8's pages): a leak keeps
      // growing through the second half, a warming process does not.
      expect(after.rss / middle.rss).toBeLessThan(1.1);
      expect(after.rss / afterWarmUp.rss).toBeLessThan(1.5);
      const metrics = await (await fetch(`${t.metrics}/metrics`)).text();
      const count = Number(
        /kiln_requests_total\{api="inference",route="\/predictions\/:model",model="addmul",status="200"\} (\d+)/.exec(
          metrics,
        )?.[1],
      );
      expect(count).toBe(8000);
      // Batching happened: fewer executions than requests.
      const batches = Number(/kiln_batch_size_count\{model="addmul"\} (\d+)/.exec(metrics)?.[1]);
      expect(batches).toBeLessThan(8000);
    },
  );
});
