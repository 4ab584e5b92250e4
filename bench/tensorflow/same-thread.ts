// Runs in a worker thread: raw tfjs and Kiln's TensorFlow engine in this one thread (the engine
// runs inline in a worker), so the ratio holds Kiln's own code only, without a thread hop.
import { parentPort, workerData } from 'node:worker_threads';
import { CPU, NDList, Tensor, servingPropertiesFrom } from '@kiln/core';
import { createTensorFlowEngine } from '@kiln/engine-tensorflow';
import { kilnContender } from '../engine-overhead/contenders.js';
import type { Contender } from '../harness/interleave.js';
import { type MeasuredRounds, measuredRounds, warmUp } from './cpu-rounds.js';
import { rawTfjs, rawTfjsContender } from './raw-tfjs.js';

export interface SameThreadJob {
  readonly label: string;
  readonly modelDir: string;
  readonly inputName: string;
  readonly input: Float32Array;
  readonly shape: readonly number[];
  readonly rounds: number;
  readonly calls: number;
}

export interface SameThreadResult {
  readonly label: string;
  /** Per round, `raw` and `kiln` milliseconds per call. */
  readonly measured: MeasuredRounds;
}

const { jobs } = workerData as { jobs: readonly SameThreadJob[] };
const tf = await rawTfjs('wasm');
const engine = await createTensorFlowEngine({ backend: 'wasm' }).load();
const results: SameThreadResult[] = [];
for (const job of jobs) {
  const model = await engine.loadModel({
    name: job.label,
    modelDir: job.modelDir,
    device: CPU,
    options: {},
    properties: servingPropertiesFrom({}),
  });
  const raw = await rawTfjsContender('raw', tf, job.modelDir, job.input, job.shape);
  const kiln = await kilnContender(
    'kiln',
    model,
    NDList.of(new Tensor('float32', job.input, job.shape, job.inputName)),
  );
  const contenders: Contender[] = [raw, kiln];
  await warmUp(contenders, 2000);
  results.push({
    label: job.label,
    measured: await measuredRounds(contenders, job.rounds, job.calls),
  });
  raw.close();
  await kiln.close();
  await model.dispose();
}
parentPort!.postMessage(results);
