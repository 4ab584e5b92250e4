/**
 * Kiln's side of the LibTorch benchmark, in its own process: the PyTorch engine's execution
 * context (NDList in, NDList out, forward off the event loop) in a plain loop.
 *
 *   node -C @kiln/source --import tsx bench/libtorch/kiln-loop.ts MODEL_DIR THREADS BATCH [key=value options]
 * Loads the model, prints "ready", then for each line "N" on stdin runs N forwards and prints
 * one JSON line {"ms": [per-forward milliseconds...]}; an empty line or EOF ends it.
 * Two options are the loop's own, not the model's: `device=cuda:0` (default cpu) and
 * `inflight=K` (default 1): K execution contexts each keep one forward going, as concurrent
 * requests would; the N forwards are then shared among them and each is given the segment's
 * wall time ÷ N.
 */
import { createInterface } from 'node:readline';
import { NDList, Tensor, parseDevice, servingPropertiesFrom } from '@kiln/core';
import { createLibTorchEngine } from '@kiln/engine-libtorch';

const [modelDir, threadsText, batchText, ...extra] = process.argv.slice(2);
const threads = Number(threadsText);
const batch = Number(batchText);

const raw: Record<string, string> = { engine: 'PyTorch', 'option.num_threads': String(threads) };
const loop = { device: 'cpu', inflight: '1' };
for (const pair of extra) {
  const [key, value] = pair.split('=', 2) as [string, string];
  if (key === 'device' || key === 'inflight') loop[key] = value;
  else raw[`option.${key}`] = value;
}
const inflight = Number(loop.inflight);
const properties = servingPropertiesFrom(raw);
const engine = await createLibTorchEngine({ numThreads: threads }).load();
const model = await engine.loadModel({
  name: 'resnet',
  modelDir: modelDir!,
  device: parseDevice(loop.device),
  options: properties.options,
  properties,
});
const contexts = await Promise.all(
  Array.from({ length: inflight }, () => model.newExecutionContext()),
);
const size = batch * 3 * 224 * 224;
const input = NDList.of(
  new Tensor(
    'float32',
    Float32Array.from({ length: size }, () => Math.random()),
    [batch, 3, 224, 224],
    'x',
  ),
);

/** N forwards one after another, each timed. */
async function oneAtATime(count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await contexts[0]!.forward(input);
    times.push(performance.now() - start);
  }
  return times;
}

/** N forwards shared among the contexts, each keeping one going; the mean of the segment. */
async function overlapping(count: number): Promise<number[]> {
  let left = count;
  const start = performance.now();
  await Promise.all(
    contexts.map(async (context) => {
      while (left > 0) {
        left--;
        await context.forward(input);
      }
    }),
  );
  return Array<number>(count).fill((performance.now() - start) / count);
}

console.log('ready');
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === '') break;
  const count = Number(line);
  console.log(JSON.stringify({ ms: await (inflight > 1 ? overlapping : oneAtATime)(count) }));
}
await Promise.all(contexts.map((c) => c.close()));
await model.dispose();
