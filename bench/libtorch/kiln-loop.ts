/**
 * Kiln's side of the LibTorch benchmark, in its own process: the PyTorch engine's execution
 * context (NDList in, NDList out, forward off the event loop) in a plain loop.
 *
 *   node -C @kiln/source --import tsx bench/libtorch/kiln-loop.ts MODEL_DIR THREADS BATCH [key=value options]
 * Loads the model, prints "ready", then for each line "N" on stdin runs N forwards and prints
 * one JSON line {"ms": [per-forward milliseconds...]}; an empty line or EOF ends it.
 */
import { createInterface } from 'node:readline';
import { CPU, NDList, Tensor, servingPropertiesFrom } from '@kiln/core';
import { createLibTorchEngine } from '@kiln/engine-libtorch';

const [modelDir, threadsText, batchText, ...extra] = process.argv.slice(2);
const threads = Number(threadsText);
const batch = Number(batchText);

const raw: Record<string, string> = { engine: 'PyTorch', 'option.num_threads': String(threads) };
for (const pair of extra) {
  const [key, value] = pair.split('=', 2);
  raw[`option.${key}`] = value!;
}
const properties = servingPropertiesFrom(raw);
const engine = await createLibTorchEngine({ numThreads: threads }).load();
const model = await engine.loadModel({
  name: 'resnet18',
  modelDir: modelDir!,
  device: CPU,
  options: properties.options,
  properties,
});
const context = await model.newExecutionContext();
const size = batch * 3 * 224 * 224;
const input = NDList.of(
  new Tensor(
    'float32',
    Float32Array.from({ length: size }, () => Math.random()),
    [batch, 3, 224, 224],
    'x',
  ),
);
console.log('ready');
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === '') break;
  const times: number[] = [];
  for (let i = 0; i < Number(line); i++) {
    const start = performance.now();
    await context.forward(input);
    times.push(performance.now() - start);
  }
  console.log(JSON.stringify({ ms: times }));
}
await context.close();
await model.dispose();
