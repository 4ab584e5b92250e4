/**
 * Kiln's OnnxRuntime path (Predictor + execution context, as a pool worker runs it on its
 * thread) against a plain
 * onnxruntime-node session loop, on the same ResNet-18 with the same thread settings. Rounds of
 * calls alternate (raw, Kiln, Kiln, raw, …), so that the load of a shared machine drifts out;
 * each figure is the median [min–max] over the rounds and the ratio is taken within each round
 * (goal ≥ 0.99), for batch 1 and 8; then the fixed cost per call on a model that does almost
 * nothing.
 *
 *   node -C @kiln/source --import tsx bench/engine-overhead/run.ts [--rounds 9] [--threads 2] [--tiny-rounds 100]
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { CPU, NDList, Tensor, encodeNpy, servingPropertiesFrom } from '@kiln/core';
import { DEFAULT_SESSION_CONFIG, OrtModel } from '@kiln/engine-onnxruntime';
import { MODEL_FILE, resnetModel, tinyModel } from '@kiln/model-tools';
import { createWorkerPool } from '@kiln/worker-pool';
import ort from 'onnxruntime-node';
import { kilnContender, rawOrtContender } from './contenders.js';
import { formatSpread, goalLine, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { type Contender, interleavedRounds, median, medianOf } from '../harness/interleave.js';
import { alternateRounds } from '../harness/rounds.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '9' },
    threads: { type: 'string', default: String(Math.min(2, availableParallelism())) },
    'tiny-rounds': { type: 'string', default: '100' },
    'tiny-calls': { type: 'string', default: '50' },
    // ONNX Runtime's default (spin) unless given: true or false, for both sides alike.
    'allow-spinning': { type: 'string' },
  },
});
const rounds = Number(args.rounds);
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

function optionOverrides(): Record<string, string> {
  return Object.fromEntries(Object.entries(kilnOptions).map(([k, v]) => [`option.${k}`, v]));
}

/**
 * The floor under the pool's hop: a worker thread that posts every message straight back. What a
 * call costs here is what crossing to another thread and back costs on this machine.
 */
function startEchoThread(): { call(body: Uint8Array): Promise<void>; close(): Promise<void> } {
  const worker = new Worker(
    "const { parentPort } = require('node:worker_threads'); parentPort.on('message', (m) => parentPort.postMessage(m));",
    { eval: true },
  );
  return {
    call: (body) =>
      new Promise((resolve) => {
        worker.once('message', () => resolve());
        worker.postMessage(body);
      }),
    close: async () => {
      await worker.terminate();
    },
  };
}

/**
 * The floor with the model: a worker thread with its own onnxruntime-node session that runs it
 * on every message (the input's floats, cloned as a caller's body is copied) and posts the
 * output's floats back — the pool's hop with none of Kiln's code. `dims`: the input's shape
 * (default one row of all the floats).
 */
async function startBareOrtThread(
  modelFile: string,
  inputName: string,
  dims?: readonly number[],
): Promise<{ call(data: Float32Array): Promise<void>; close(): Promise<void> }> {
  const source = `
    const { parentPort, workerData } = require('node:worker_threads');
    const ort = require('onnxruntime-node');
    ort.InferenceSession.create(workerData.modelFile, workerData.options).then((session) => {
      parentPort.on('message', async (data) => {
        const dims = workerData.dims ?? [1, data.length];
        const out = await session.run({ [workerData.inputName]: new ort.Tensor('float32', data, dims) });
        const result = out[session.outputNames[0]].data;
        parentPort.postMessage(result, [result.buffer]);
      });
      parentPort.postMessage('ready');
    });`;
  const worker = new Worker(source, {
    eval: true,
    workerData: { modelFile, inputName, options: sessionOptions, dims },
  });
  await new Promise((resolve) => worker.once('message', resolve));
  return {
    call: (data) =>
      new Promise((resolve) => {
        worker.once('message', () => resolve());
        worker.postMessage(data);
      }),
    close: async () => {
      await worker.terminate();
    },
  };
}

/** Kiln's model at its defaults (weights shared, the optimized model kept for this process). */
function loadKiln(modelDir: string, more: Record<string, string> = {}): Promise<OrtModel> {
  const properties = servingPropertiesFrom({});
  const options = { ...kilnOptions, optimizedModelCache: 'false', ...more };
  return OrtModel.load({ name: 'bench', modelDir, device: CPU, options, properties });
}

const dir = await mkdtemp(join(tmpdir(), 'kiln-bench-overhead-'));
try {
  console.log(
    `engine-overhead: onnxruntime-node ${ort.env.versions.node}, ${threads} intra-op thread(s), optimization all, spinning ${spinning ?? 'default'}, ${machineLine()}`,
  );
  const resnet = await resnetModel(join(dir, 'resnet18'), { depth: 18 });
  const rawResnet = await ort.InferenceSession.create(join(resnet.dir, MODEL_FILE), sessionOptions);
  const kilnResnet = await loadKiln(resnet.dir);
  // Every session reading the weights in place from the shared mapping (shareWeights=all): what
  // the default's first session, pre-packed in a copy of its own, saves against it.
  const kilnOwnResnet = await loadKiln(resnet.dir, { shareWeights: 'all' });

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
    const kilnOwn = await kilnContender(
      'kiln-own',
      kilnOwnResnet,
      NDList.of(new Tensor('float32', data, shape, 'input')),
    );
    // Rounds of several calls each, raw and Kiln alternating (A B, B A, …): each round's ratio
    // compares two stretches of work done under the same machine state.
    // The README's in-process pool (createWorkerPool at its defaults, the model on an inference
    // thread), answering npy bodies of the same input.
    // A copy of the folder: a process pre-packs the first session of a model file and shares
    // the weights of the others (see shareWeights), and the Kiln contenders above hold it here.
    const poolDir = join(dir, `resnet18-pool-${batch}`);
    await cp(resnet.dir, poolDir, { recursive: true });
    const pool = await createWorkerPool({
      model: {
        url: poolDir,
        engines: ['@kiln/engine-onnxruntime'],
        overrides: optionOverrides(),
      },
    });
    const npy = encodeNpy(new Tensor('float32', data, shape, 'input'));
    const poolCall = {
      name: 'pool',
      call: () => pool.predict({ body: npy, contentType: 'application/x-npy' }),
    };
    // The pool's crossing with none of Kiln's code: what a thread hop costs a forward here.
    const bareThread = await startBareOrtThread(join(resnet.dir, MODEL_FILE), 'input', shape);
    const bareCall = { name: 'bare-thread', call: () => bareThread.call(data) };
    const calls = batch === 1 ? 10 : 3;
    const rate = (contender: Contender) => async () => {
      const start = performance.now();
      for (let i = 0; i < calls; i++) await contender.call();
      return (1000 * batch * calls) / (performance.now() - start);
    };
    const imagesPerSecond = await alternateRounds(
      [
        { name: 'raw', measure: rate(raw) },
        { name: 'kiln', measure: rate(kiln) },
        { name: 'kiln-own', measure: rate(kilnOwn) },
        { name: 'pool', measure: rate(poolCall) },
        { name: 'bare-thread', measure: rate(bareCall) },
      ],
      { rounds: batch === 1 ? rounds : Math.ceil(rounds / 2), warmupRounds: 1 },
    );
    console.log(
      `ResNet-18 batch ${batch} (${calls} calls a round): raw ${formatSpread(spreadOf(imagesPerSecond.raw!))} img/s, ` +
        `Kiln ${formatSpread(spreadOf(imagesPerSecond.kiln!))} img/s, ` +
        `Kiln reading the shared mapping in place (shareWeights=all) ${formatSpread(spreadOf(imagesPerSecond['kiln-own']!))} img/s`,
    );
    console.log(
      `  ${goalLine('Kiln ÷ raw', ratioSpread(imagesPerSecond.kiln!, imagesPerSecond.raw!), { atLeast: 0.99 }, '×', 3)}`,
    );
    console.log(
      `  default (first session pre-packed in its own copy) ÷ shareWeights=all: ${formatSpread(ratioSpread(imagesPerSecond.kiln!, imagesPerSecond['kiln-own']!), 3)}×`,
    );
    console.log(
      `  in-process worker pool (README's createWorkerPool, npy bodies) ${formatSpread(spreadOf(imagesPerSecond.pool!))} img/s (${pool.describe().placement.kind}); ` +
        goalLine(
          'pool ÷ raw',
          ratioSpread(imagesPerSecond.pool!, imagesPerSecond.raw!),
          { atLeast: 0.98 },
          '×',
          3,
        ),
    );
    console.log(
      `  a bare thread running the same session on a copy of each input (no Kiln code) ${formatSpread(spreadOf(imagesPerSecond['bare-thread']!))} img/s; ` +
        `÷ raw ${formatSpread(ratioSpread(imagesPerSecond['bare-thread']!, imagesPerSecond.raw!), 3)}× (a thread hop's bound on pool ÷ raw here), ` +
        `pool ÷ it ${formatSpread(ratioSpread(imagesPerSecond.pool!, imagesPerSecond['bare-thread']!), 3)}×`,
    );
    await bareThread.close();
    await pool.shutdown();
    await kiln.close();
    await kilnOwn.close();

    // The same forwards timed from both sides: what Kiln adds to a run.
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
      `  time outside ONNX Runtime (input binding, output reading): median ${(share * 100).toFixed(2)}% of a forward ` +
        `→ ratio bound ${(1 - share).toFixed(3)}`,
    );
    await context.close();
  }
  await rawResnet.release();
  await kilnResnet.dispose();
  await kilnOwnResnet.dispose();

  const tiny = await tinyModel(join(dir, 'tiny'));
  const x = Float32Array.of(1, 2, 3, 4);
  const rawTiny = await ort.InferenceSession.create(join(tiny, MODEL_FILE), sessionOptions);
  const kilnTiny = await loadKiln(tiny);
  // The same model behind a one-worker pool: the thread hop and the npy codec included. On a
  // thread, as the server runs it: the pool's own default (auto) would run this model inline.
  const pool = await createWorkerPool({
    model: { url: tiny, engines: ['@kiln/engine-onnxruntime'], overrides: optionOverrides() },
    settings: { minWorkers: 1, maxWorkers: 1, maxBatchDelayMs: 0, placement: 'thread' },
  });
  if (pool.describe().placement.kind !== 'thread')
    throw new Error(`the pool runs ${pool.describe().placement.kind}, not on a thread`);
  const body = encodeNpy(new Tensor('float32', x, [1, 4], 'x'));
  const echo = startEchoThread();
  const bareOrt = await startBareOrtThread(join(tiny, MODEL_FILE), 'x');
  const contenders = [
    rawOrtContender('raw', rawTiny, { x: new ort.Tensor('float32', x, [1, 4]) }),
    await kilnContender('calling', kilnTiny, NDList.of(new Tensor('float32', x, [1, 4], 'x'))),
    { name: 'pool', call: () => pool.predict({ body, contentType: 'application/x-npy' }) },
    { name: 'echo', call: () => echo.call(body) },
    { name: 'bare-ort', call: () => bareOrt.call(Float32Array.from(x)) },
  ];
  await interleavedRounds(contenders, 3, tinyCalls);
  const results = await interleavedRounds(contenders, tinyRounds, tinyCalls);
  const us = (f: (r: Record<string, number>) => number) => (medianOf(results, f) * 1000).toFixed(1);
  console.log(
    `tiny model, per call: raw ${us((r) => r.raw!)} µs, Kiln Predictor ${us((r) => r.calling!)} µs, ` +
      `Kiln one-worker pool (npy body, thread hop) ${us((r) => r.pool!)} µs`,
  );
  console.log(
    `fixed overhead per call: Predictor ${us((r) => r.calling! - r.raw!)} µs, pool ${us((r) => r.pool! - r.raw!)} µs ` +
      `(thread hop and codec ${us((r) => r.pool! - r.calling!)} µs; goal ≤ 30 µs)`,
  );
  console.log(
    `  a bare postMessage round trip to a thread that posts the same npy body straight back (no Kiln code): ${us((r) => r.echo!)} µs; ` +
      `the pool's hop and codec above it ${us((r) => r.pool! - r.calling! - r.echo!)} µs`,
  );
  const within = (f: (r: Record<string, number>) => number) =>
    spreadOf(results.map((r) => f(r.msPerCall)));
  console.log(
    `  ${goalLine(
      'pool round trip on a thread ÷ bare postMessage round trip',
      within((r) => r.pool! / r.echo!),
      { atMost: 1.5 },
    )}`,
  );
  console.log(
    `  a bare thread running the same session on each message (no Kiln code): ${us((r) => r['bare-ort']!)} µs, ` +
      `${formatSpread(
        within((r) => r['bare-ort']! / r.echo!),
        2,
      )}× the bare round trip — the floor with the model; ` +
      `pool ÷ it ${formatSpread(
        within((r) => r.pool! / r['bare-ort']!),
        2,
      )}×`,
  );
  await echo.close();
  await bareOrt.close();
  await rawTiny.release();
  await kilnTiny.dispose();
  await pool.shutdown();
  console.log(`end: ${machineLine()}`);
} finally {
  await rm(dir, { recursive: true, force: true });
}
