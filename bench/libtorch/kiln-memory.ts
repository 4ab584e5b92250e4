/**
 * Memory of Kiln serving one TorchScript model from several predictors, run in its own
 * process: `shared` makes N execution contexts of one model (one module, weights held once);
 * `separate` loads the model N times, one context each, for comparison. Every context runs
 * ROUNDS forwards at batch 1, all contexts at once, then the process reports its memory.
 *
 *   node -C @kiln/source --import tsx bench/libtorch/kiln-memory.ts MODEL_DIR shared|separate N ROUNDS
 * Prints one JSON line: {"rssMiB": current resident set, "peakMiB": peak resident set}.
 */
import { readFileSync } from 'node:fs';
import { CPU, type Model, NDList, Tensor, servingPropertiesFrom } from '@kiln/core';
import { createLibTorchEngine } from '@kiln/engine-libtorch';

const [modelDir, mode, countText, roundsText] = process.argv.slice(2);
const count = Number(countText);
const rounds = Number(roundsText);

const properties = servingPropertiesFrom({ engine: 'PyTorch' });
const engine = await createLibTorchEngine({ numThreads: 1 }).load();
const load = () =>
  engine.loadModel({
    name: 'resnet18',
    modelDir: modelDir!,
    device: CPU,
    options: properties.options,
    properties,
  });
const models: Model[] = [];
for (let i = 0; i < (mode === 'separate' ? count : 1); i++) models.push(await load());
// One intra-op thread per context, as a worker pool gives each predictor its share of the cores.
const contexts = await Promise.all(
  Array.from({ length: count }, (_, i) =>
    models[i % models.length]!.newExecutionContext({ intraOpThreads: 1 }),
  ),
);
const input = NDList.of(
  new Tensor('float32', new Float32Array(3 * 224 * 224).fill(0.5), [1, 3, 224, 224], 'x'),
);
for (let r = 0; r < rounds; r++) await Promise.all(contexts.map((c) => c.forward(input)));

const status = readFileSync('/proc/self/status', 'utf8');
const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)![1]);
console.log(JSON.stringify({ rssMiB: kib('VmRSS') / 1024, peakMiB: kib('VmHWM') / 1024 }));
