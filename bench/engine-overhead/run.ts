/**
 * Kiln's OnnxRuntime path (Predictor + execution context on a worker thread) against a plain
 * onnxruntime-node session loop, on the same ResNet-18 with the same thread settings. Calls
 * alternate (raw, Kiln, Kiln, raw, …) and each adjacent pair gives one ratio, so that the
 * load of a shared machine drifts out; the median pair is printed for batch 1 and 8 (target
 * ≥ 0.97), then the fixed cost per call on a model that does almost nothing.
 *
 *   node --import tsx bench/engine-overhead/run.ts [--pairs 60] [--threads 2] [--tiny-rounds 100]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CPU, NDList, Tensor, servingPropertiesFrom } from '@kiln/core';
import {
  DEFAULT_SESSION_CONFIG,
  OrtModel,
  type SessionThreadPolicy,
} from '@kiln/engine-onnxruntime';
import { MODEL_FILE, resnetModel, tinyModel } from '@kiln/model-tools';
import ort from 'onnxruntime-node';
import { kilnContender, rawOrtContender } from './contenders.js';
import { interleavedRounds, median, medianOf, quantileOf } from './interleave.js';

const { values: args } = parseArgs({
  options: {
    pairs: { type: 'string', default: '60' },
    threads: { type: 'string', default: String(Math.min(2, availableParallelism())) },
    'tiny-rounds': { type: 'string', default: '100' },
    'tiny-calls': { type: 'string', default: '50' },
    // ONNX Runtime's default (spin) unless given: true or false, for both sides alike.
    'allow-spinning': { type: 'string' },
  },
});
const pairs = Number(args.pairs);
const threads = Number(args.threads);
const tinyRounds = Number(args['tiny-rounds']);
const tinyCalls = Number(args['tiny-calls']);

// Both contenders spin the same way: Kiln's default unless --allow-spinning says otherwise.
const spinning = args['allow-spinning'] ?? String(DEFAULT_SESSION_CONFIG.allowSpinning);
const spinFlag = spinning === undefined ? undefined : spinning === 'true' ? '1' : '0';
const sessionOptions = {
  intraOpNumThreads: threads,
  graphOptimizationLevel: 'all',
  executionMode: 'sequential',
  ...(spinFlag === undefined
    ? {}
    : {
        extra: {
          session: {
            intra_op: { allow_spinning: spinFlag },
            inter_op: { allow_spinning: spinFlag },
          },
        },
      }),
} as const;
const kilnOptions = {
  intraOpNumThreads: String(threads),
  optLevel: 'all',
  executionMode: 'sequential',
  ...(spinning === undefined ? {} : { allowSpinning: spinning }),
};

function loadKiln(modelDir: string, sessionThread: SessionThreadPolicy): Promise<OrtModel> {
  const properties = servingPropertiesFrom({});
  return OrtModel.load(
    { name: 'bench', modelDir, device: CPU, options: kilnOptions, properties },
    { sessionThread },
  );
}

const dir = await mkdtemp(join(tmpdir(), 'kiln-bench-overhead-'));
try {
  console.log(
    `engine-overhead: onnxruntime-node ${ort.env.versions.node}, ${threads} intra-op thread(s), optimization all, spinning ${spinning ?? 'default'}, Node ${process.version}, ${availableParallelism()} cores`,
  );
  const resnet = await resnetModel(join(dir, 'resnet18'), { depth: 18 });
  const rawResnet = await ort.InferenceSession.create(join(resnet.dir, MODEL_FILE), sessionOptions);
  const kilnResnet = await loadKiln(resnet.dir, 'worker');

  for (const batch of [1, 8]) {
    const data = Float32Array.from({ length: batch * 3 * 224 * 224 }, (_, i) => Math.sin(i / 101));
    const shape = [batch, 3, 224, 224];
    const raw = rawOrtContender('raw', rawResnet, {
      input: new ort.Tensor('float32', data, shape),
    });
    const kiln = await kilnContender(
      'kiln',
      kilnResnet,
      NDList.of(new Tensor('float32', data, shape, 'input')),
    );
    await interleavedRounds([raw, kiln], 2, 2);
    // Batch 8 runs 8× longer per call: fewer pairs keep it within the same time.
    const results = await interleavedRounds(
      [raw, kiln],
      batch === 1 ? pairs : Math.ceil(pairs / 3),
      1,
    );
    const ratio = medianOf(results, (r) => r.raw! / r.kiln!);
    const rawPerS = medianOf(results, (r) => (1000 * batch) / r.raw!);
    const kilnPerS = medianOf(results, (r) => (1000 * batch) / r.kiln!);
    const spread = [0.25, 0.75].map((q) =>
      quantileOf(results, q, (r) => r.raw! / r.kiln!).toFixed(3),
    );
    console.log(
      `ResNet-18 batch ${batch}: raw ${rawPerS.toFixed(1)} img/s, Kiln ${kilnPerS.toFixed(1)} img/s, ` +
        `ratio ${ratio.toFixed(3)} (${ratio >= 0.97 ? 'meets' : 'misses'} ≥ 0.97; middle half of ${results.length} pairs ${spread.join('–')})`,
    );
    await kiln.close();

    // The same forwards timed from both sides: what the worker thread path adds to a run.
    const context = await kilnResnet.newExecutionContext();
    const input = NDList.of(new Tensor('float32', data, shape, 'input'));
    const outside: number[] = [];
    for (let i = 0; i < (batch === 1 ? 30 : 10); i++) {
      const start = performance.now();
      await context.forward(input);
      const wallMs = performance.now() - start;
      outside.push((wallMs - context.lastRun!.runMs) / wallMs);
    }
    const share = median(outside);
    console.log(
      `  time outside ONNX Runtime (thread hop, input copy, output transfer): median ${(share * 100).toFixed(2)}% of a forward ` +
        `→ ratio bound ${(1 - share).toFixed(3)}`,
    );
    await context.close();
  }
  await rawResnet.release();
  await kilnResnet.dispose();

  const tiny = await tinyModel(join(dir, 'tiny'));
  const x = Float32Array.of(1, 2, 3, 4);
  const rawTiny = await ort.InferenceSession.create(join(tiny, MODEL_FILE), sessionOptions);
  const workerModel = await loadKiln(tiny, 'worker');
  const callingModel = await loadKiln(tiny, 'calling');
  const contenders = [
    rawOrtContender('raw', rawTiny, { x: new ort.Tensor('float32', x, [1, 4]) }),
    await kilnContender('worker', workerModel, NDList.of(new Tensor('float32', x, [1, 4], 'x'))),
    await kilnContender('calling', callingModel, NDList.of(new Tensor('float32', x, [1, 4], 'x'))),
  ];
  await interleavedRounds(contenders, 3, tinyCalls);
  const results = await interleavedRounds(contenders, tinyRounds, tinyCalls);
  const us = (f: (r: Record<string, number>) => number) => (medianOf(results, f) * 1000).toFixed(1);
  console.log(
    `tiny model, per call: raw ${us((r) => r.raw!)} µs, Kiln on the calling thread ${us((r) => r.calling!)} µs, ` +
      `Kiln on a worker thread ${us((r) => r.worker!)} µs`,
  );
  console.log(
    `fixed overhead per call: ${us((r) => r.worker! - r.raw!)} µs (Kiln's own code ${us((r) => r.calling! - r.raw!)} µs, ` +
      `thread hop and copies ${us((r) => r.worker! - r.calling!)} µs)`,
  );
  await rawTiny.release();
  await workerModel.dispose();
  await callingModel.dispose();
} finally {
  await rm(dir, { recursive: true, force: true });
}
