/**
 * One pass of pool-cpu.ts: `node --import tsx pool-cpu-pass.ts TREE MODEL_DIR REQUESTS`. Loads
 * TREE's built worker pool, keeps a one-thread pool of the model busy with 64 callers until
 * REQUESTS answers came back (after 2000 unmeasured), and prints one JSON line: requests a
 * second and CPU µs a request of the main thread, the pool's host thread and all other threads.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as KilnCore from '@kiln/core';
import type * as KilnWorkerPool from '@kiln/worker-pool';

const [tree, modelDir, requestsText] = process.argv.slice(2) as [string, string, string];
const { createWorkerPool } = (await import(
  pathToFileURL(join(tree, 'packages/worker-pool/dist/index.js')).href
)) as typeof KilnWorkerPool;
const { Tensor, encodeNpy } = (await import(
  pathToFileURL(join(tree, 'packages/core/dist/index.js')).href
)) as typeof KilnCore;

/** CPU µs each thread of this process has used, by thread id (Linux /proc, 100 ticks a second). */
function threadCpu(): Map<number, number> {
  const cpu = new Map<number, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    cpu.set(Number(tid), (Number(fields[11]) + Number(fields[12])) * 10_000);
  }
  return cpu;
}

const pool = await createWorkerPool({
  model: {
    url: modelDir,
    // Each build's session pre-packs its weights alike (builds before the first session kept a
    // copy of its own read the shared mapping unpacked): the passes compare the pool alone.
    overrides: { 'option.shareWeights': 'false' },
    engines: [pathToFileURL(join(tree, 'packages/engine-onnxruntime/dist/index.js')).href],
  },
  settings: {
    minWorkers: 1,
    maxWorkers: 1,
    placement: 'thread',
    batchSize: 32,
    maxBatchDelayMs: 0,
  },
});
const input = new Tensor(
  'float32',
  Float32Array.from({ length: 64 }, (_, i) => i / 64),
  [1, 64],
  'x',
);
const body = encodeNpy(input);

async function run(requests: number): Promise<void> {
  let sent = 0;
  const caller = async () => {
    while (sent < requests) {
      sent++;
      // Each request's own body, as a server hands over the memory it read.
      await pool.predict({
        body: Uint8Array.from(body),
        contentType: 'application/x-npy',
        owned: true,
      });
    }
  };
  await Promise.all(Array.from({ length: 64 }, caller));
}

await run(2000);
const requests = Number(requestsText);
const before = threadCpu();
const started = performance.now();
await run(requests);
const seconds = (performance.now() - started) / 1000;
const after = threadCpu();
const used = [...after].map(([tid, us]) => [tid, us - (before.get(tid) ?? 0)] as const);
const main = used.find(([tid]) => tid === process.pid)?.[1] ?? 0;
// The pool's host thread: the busiest thread other than the main one.
const others = used.filter(([tid]) => tid !== process.pid).sort((a, b) => b[1] - a[1]);
const host = others[0]?.[1] ?? 0;
const rest = others.slice(1).reduce((sum, [, us]) => sum + us, 0);
await pool.shutdown();
console.log(
  JSON.stringify({
    requestsPerSecond: requests / seconds,
    mainUs: main / requests,
    hostUs: host / requests,
    otherUs: rest / requests,
  }),
);
