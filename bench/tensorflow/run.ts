/**
 * The TensorFlow engine against raw tfjs on the same backend and model (target ≥ 0.97), then
 * the same networks on the TensorFlow and ONNX Runtime engines side by side.
 *
 *   node -C @kiln/source --import tsx bench/tensorflow/run.ts [--pairs 16] [--rounds 12] [--segment-ms 250]
 *     [--same-thread-rounds 30] [--warm-up-ms 2000] [--sections 1,2,3,4]
 *
 * 1. Kiln vs raw tfjs (wasm): raw tfjs runs on the main thread as an application would
 *    (blocking it); Kiln is a worker pool at its defaults (`createWorkerPool`), which runs
 *    the model on a worker thread, or inline on the main thread when a batch takes at most
 *    its inline limit (placement auto). Turns of about --segment-ms alternate; each pair of
 *    turns gives one ratio raw/Kiln, in wall time and in the process's CPU time (which other
 *    processes on the cores do not inflate as much).
 * 2. The same comparison inside one worker thread (the engine runs inline there): Kiln's own
 *    code without the thread hop, on the CNN and on a model that does almost nothing.
 * 3. TensorFlow (wasm, one thread per context) and ONNX Runtime (1 and 2 intra-op threads)
 *    through Kiln on the same networks with the same weights; outputs are checked to agree.
 * 4. The pure-JavaScript cpu backend against wasm, for scale.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  CPU,
  type Engine,
  type Model,
  NDList,
  Tensor,
  servingPropertiesFrom,
  spawnModuleWorker,
} from '@kiln/core';
import { createOnnxRuntimeEngine } from '@kiln/engine-onnxruntime';
import { createTensorFlowEngine } from '@kiln/engine-tensorflow';
import { tfjsAffineModel } from '@kiln/testing';
import { createWorkerPool } from '@kiln/worker-pool';
import { kilnContender } from '../engine-overhead/contenders.js';
import { type Contender, type RoundResult, medianOf, quantileOf } from '../harness/interleave.js';
import { type MeasuredRounds, callsForSegment, measuredRounds, warmUp } from './cpu-rounds.js';
import { type TwinModel, writeCnnTwins, writeMlpTwins } from './models.js';
import { rawTfjs, rawTfjsContender } from './raw-tfjs.js';
import type { SameThreadJob, SameThreadResult } from './same-thread.js';

const { values: args } = parseArgs({
  options: {
    pairs: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '12' },
    'same-thread-rounds': { type: 'string', default: '30' },
    'warm-up-ms': { type: 'string', default: '2000' },
    'segment-ms': { type: 'string', default: '250' },
    sections: { type: 'string', default: '1,2,3,4' },
  },
});
const sections = new Set(args.sections.split(',').map((s) => s.trim()));
const pairs = Number(args.pairs);
const rounds = Number(args.rounds);
const sameThreadRounds = Number(args['same-thread-rounds']);
const WARM_UP_MS = Number(args['warm-up-ms']);
// Each contender's turn in a round lasts about this long: switching between the main thread
// and a worker thread costs something each time, which short turns would count many times.
const SEGMENT_MS = Number(args['segment-ms']);

type KilnContender = Contender & { close(): Promise<void> };

function request(modelDir: string, options: Record<string, string> = {}) {
  return { name: 'bench', modelDir, device: CPU, options, properties: servingPropertiesFrom({}) };
}

/** Deterministic input of `batch` examples. */
/** What section 1 needs of a model: its TF.js folder and input. */
type TfjsModel = Pick<TwinModel, 'name' | 'tfjsDir' | 'inputName' | 'tfjsExample'>;

function inputFor(model: TfjsModel, batch: number): Float32Array {
  const size = batch * model.tfjsExample.reduce((a, b) => a * b, 1);
  return Float32Array.from({ length: size }, (_, i) => Math.sin(i / 97) * 0.5 + 0.5);
}

async function predictOnce(model: Model, input: NDList): Promise<Float32Array> {
  const context = await model.newExecutionContext();
  const output = (await context.forward(input)).get(0).data as Float32Array;
  await context.close();
  return output;
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  return a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);
}

/** Median of a per-round ratio, with its middle half. */
function ratioOf(results: RoundResult[], a: string, b: string): { median: number; text: string } {
  const median = medianOf(results, (r) => r[a]! / r[b]!);
  const spread = [0.25, 0.75].map((q) => quantileOf(results, q, (r) => r[a]! / r[b]!).toFixed(2));
  return { median, text: `${median.toFixed(3)} (${spread.join('–')})` };
}

const perSecond = (results: RoundResult[], name: string, batch: number) =>
  medianOf(results, (r) => (1000 * batch) / r[name]!).toFixed(1);

function kilnVersusRawRow(
  label: string,
  batch: number,
  measured: MeasuredRounds,
  note: string,
): void {
  const wall = ratioOf(measured.wall, 'raw', 'kiln');
  const cpu = ratioOf(measured.cpu, 'raw', 'kiln');
  console.log(
    `| ${label} | ${batch} | ${perSecond(measured.wall, 'raw', batch)} | ${perSecond(measured.wall, 'kiln', batch)} | ` +
      `${wall.text} | **${cpu.text}** ${cpu.median >= 0.97 ? 'meets' : 'misses'} ≥ 0.97 | ${note} |`,
  );
}

async function kilnVersusRaw(model: TfjsModel, batch: number): Promise<void> {
  const tf = await rawTfjs('wasm');
  const data = inputFor(model, batch);
  const shape = [batch, ...model.tfjsExample];
  const raw = await rawTfjsContender('raw', tf, model.tfjsDir, data, shape);
  const pool = await createWorkerPool({
    model: { url: model.tfjsDir, engines: ['@kiln/engine-tensorflow'] },
    // A fixed batch, as the rows say; everything else at the pool's defaults.
    settings: { batchSize: 1 },
  });
  const input = NDList.of(new Tensor('float32', data, shape, model.inputName));
  const kiln: KilnContender = {
    name: 'kiln',
    call: async () => {
      const output = await pool.predict({ tensors: input, rawTensors: true });
      if (output.type !== 'tensors') throw new Error(`unexpected ${output.type} output`);
      return output.tensors.get(0).data;
    },
    close: () => pool.shutdown(),
  };
  const agree = maxAbsDiff((await raw.call()) as Float32Array, (await kiln.call()) as Float32Array);
  const { placement } = pool.describe();
  await warmUp([raw, kiln], WARM_UP_MS);
  const measured = await measuredRounds(
    [raw, kiln],
    pairs,
    await callsForSegment([raw, kiln], SEGMENT_MS),
  );
  kilnVersusRawRow(
    model.name,
    batch,
    measured,
    `${placement.kind}${placement.probe && 'bestUs' in placement.probe ? ` (probe: batch ${placement.probe.batch} ${placement.probe.bestUs} µs)` : ''}; max |Δ| ${agree.toExponential(1)}`,
  );
  raw.close();
  await kiln.close();
}

async function sameThread(jobs: SameThreadJob[]): Promise<SameThreadResult[]> {
  const worker = spawnModuleWorker(new URL('./same-thread.ts', import.meta.url), {
    workerData: { jobs },
  });
  try {
    return await new Promise<SameThreadResult[]>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
  } finally {
    await worker.terminate();
  }
}

async function sideBySide(
  engines: Record<string, Engine>,
  model: TwinModel,
  batch: number,
): Promise<void> {
  const data = inputFor(model, batch);
  const tfInput = NDList.of(
    new Tensor('float32', data, [batch, ...model.tfjsExample], model.inputName),
  );
  const onnxInput = NDList.of(
    new Tensor(
      'float32',
      model.toOnnxLayout(data, batch),
      [batch, ...model.onnxExample],
      model.inputName,
    ),
  );
  const setups: [string, Engine, string, Record<string, string>, NDList][] = [
    ['tf', engines.tf!, model.tfjsDir, {}, tfInput],
    ['ort1', engines.ort!, model.onnxDir, { intraOpNumThreads: '1' }, onnxInput],
    ['ort2', engines.ort!, model.onnxDir, { intraOpNumThreads: '2' }, onnxInput],
  ];
  const models: Model[] = [];
  const contenders: KilnContender[] = [];
  const outputs: Float32Array[] = [];
  for (const [name, engine, dir, options, input] of setups) {
    const loaded = await engine.loadModel(request(dir, options));
    models.push(loaded);
    outputs.push(await predictOnce(loaded, input));
    contenders.push(await kilnContender(name, loaded, input));
  }
  await warmUp(contenders, WARM_UP_MS);
  const measured = await measuredRounds(
    contenders,
    rounds,
    await callsForSegment(contenders, SEGMENT_MS),
  );
  const cell = (name: string) =>
    `${perSecond(measured.wall, name, batch)} (${medianOf(measured.cpu, (r) => r[name]! / batch).toFixed(2)})`;
  console.log(
    `| ${model.name} | ${batch} | ${cell('tf')} | ${cell('ort1')} | ${cell('ort2')} | ` +
      `${medianOf(measured.wall, (r) => r.tf! / r.ort1!).toFixed(1)}× | ` +
      `${medianOf(measured.wall, (r) => r.tf! / r.ort2!).toFixed(1)}× | ${maxAbsDiff(outputs[0]!, outputs[1]!).toExponential(1)} |`,
  );
  await Promise.all(contenders.map((c) => c.close()));
  await Promise.all(models.map((m) => m.dispose()));
}

async function cpuVersusWasm(engines: Record<string, Engine>, model: TwinModel): Promise<void> {
  const data = inputFor(model, 1);
  const input = NDList.of(new Tensor('float32', data, [1, ...model.tfjsExample], model.inputName));
  const wasmModel = await engines.tf!.loadModel(request(model.tfjsDir));
  const cpuModel = await engines.tfCpu!.loadModel(request(model.tfjsDir));
  const contenders = [
    await kilnContender('wasm', wasmModel, input),
    await kilnContender('cpu', cpuModel, input),
  ];
  await warmUp(contenders, WARM_UP_MS, 2);
  const measured = await measuredRounds(contenders, Math.max(3, Math.ceil(rounds / 2)), 2);
  console.log(
    `- ${model.name}, batch 1: wasm ${perSecond(measured.wall, 'wasm', 1)}/s, cpu ${perSecond(measured.wall, 'cpu', 1)}/s; ` +
      `the cpu backend takes ${medianOf(measured.cpu, (r) => r.cpu! / r.wasm!).toFixed(1)}× the CPU time of wasm`,
  );
  await Promise.all(contenders.map((c) => c.close()));
  await Promise.all([wasmModel.dispose(), cpuModel.dispose()]);
}

const dir = await mkdtemp(join(tmpdir(), 'kiln-bench-tensorflow-'));
try {
  // Only the engine a section measures is loaded while it runs.
  const engines: Record<string, Engine> = {
    tf: await createTensorFlowEngine({ backend: 'wasm' }).load(),
  };
  const tfFacts = engines.tf!.describe();
  console.log(
    `tensorflow bench: ${String(tfFacts.package)} (SIMD ${String(tfFacts.simd)}), ` +
      `Node ${process.version}, ${availableParallelism()} cores, load average ${loadavg()[0]!.toFixed(1)}`,
  );
  const cnn = await writeCnnTwins(dir);
  const bigCnn = await writeCnnTwins(dir, 128);
  const mlp = await writeMlpTwins(dir);
  const tiny = await tfjsAffineModel(join(dir, 'tiny'));
  const affine: TfjsModel = {
    name: 'affine 4→2',
    tfjsDir: tiny.dir,
    inputName: 'x',
    tfjsExample: [4],
  };

  if (sections.has('1')) {
    console.log(
      '\n1. Kiln vs raw tfjs, wasm backend (raw on the main thread, Kiln a worker pool at its defaults)\n',
    );
    console.log(
      '| model | batch | raw tfjs /s | Kiln /s | raw/Kiln, wall | raw/Kiln, CPU | placement; outputs |',
    );
    console.log('| --- | ---: | ---: | ---: | --- | --- | --- |');
    for (const [model, batch] of [
      [bigCnn, 1],
      [bigCnn, 4],
      [cnn, 1],
      [cnn, 8],
      [mlp, 1],
      [mlp, 32],
      [affine, 1],
    ] as const) {
      await kilnVersusRaw(model, batch);
    }
  }

  if (sections.has('2')) {
    console.log(
      "\n2. Kiln vs raw tfjs in one worker thread (the engine inline): Kiln's own code\n",
    );
    console.log(
      '| model | raw tfjs µs/call | raw/Kiln, wall | raw/Kiln, CPU | Kiln − raw, CPU µs/call |',
    );
    console.log('| --- | ---: | --- | --- | ---: |');
    const jobs: SameThreadJob[] = [
      {
        label: bigCnn.name,
        modelDir: bigCnn.tfjsDir,
        inputName: 'x',
        input: inputFor(bigCnn, 1),
        shape: [1, ...bigCnn.tfjsExample],
        rounds: sameThreadRounds,
        calls: 1,
      },
      {
        label: cnn.name,
        modelDir: cnn.tfjsDir,
        inputName: 'x',
        input: inputFor(cnn, 1),
        shape: [1, ...cnn.tfjsExample],
        rounds: sameThreadRounds,
        calls: 4,
      },
      {
        label: 'affine 4→2',
        modelDir: tiny.dir,
        inputName: 'x',
        input: Float32Array.of(1, 2, 3, 4),
        shape: [1, 4],
        rounds: sameThreadRounds,
        calls: 200,
      },
    ];
    for (const result of await sameThread(jobs)) {
      const cost = medianOf(result.measured.cpu, (r) => r.kiln! - r.raw!) * 1000;
      console.log(
        `| ${result.label} | ${(medianOf(result.measured.wall, (r) => r.raw!) * 1000).toFixed(0)} | ` +
          `${ratioOf(result.measured.wall, 'raw', 'kiln').text} | **${ratioOf(result.measured.cpu, 'raw', 'kiln').text}** | ${cost.toFixed(1)} |`,
      );
    }
  }

  if (sections.has('3')) {
    engines.ort = await createOnnxRuntimeEngine().load();
    console.log(
      `\n3. The same networks on TensorFlow (wasm) and ONNX Runtime ${engines.ort.version} through Kiln: inferences/s (CPU ms per inference)\n`,
    );
    console.log(
      '| model | batch | TensorFlow wasm | ORT 1 thread | ORT 2 threads | ORT 1 thread vs TF | ORT 2 threads vs TF | max |Δ| TF vs ORT |',
    );
    console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const [model, batch] of [
      [bigCnn, 1],
      [cnn, 1],
      [cnn, 8],
      [mlp, 1],
      [mlp, 8],
    ] as const) {
      await sideBySide(engines, model, batch);
    }
  }

  if (sections.has('4')) {
    engines.tfCpu = await createTensorFlowEngine({ backend: 'cpu' }).load();
    console.log('\n4. The pure-JavaScript cpu backend\n');
    await cpuVersusWasm(engines, cnn);
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
