import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isMainThread } from 'node:worker_threads';
import {
  CPU,
  ENGINE_SPECIFICATION_VERSION,
  type Engine,
  type EngineProvider,
  KilnError,
  KilnErrorCode,
  type Model,
  type ModelLoadRequest,
  type StepDecoder,
  type StepEntry,
} from '@kiln/core';

/**
 * A small text-generation engine for the pool's tests: its step decoder's logits are a hash
 * of every token a sequence was fed, so any scheduling mistake (a token fed twice, out of
 * order, or to another sequence) changes the output, and it runs the same on any thread.
 * Its vocabulary is the character one of `vocab.json` in its folder. Prompt characters
 * trigger failures: `#` ends the thread (process.exit), `!` fails the step.
 */
export const STEP_MODEL_FILE = 'model.step';
export const STEP_ENGINE_MODULE = new URL('./step-engine.ts', import.meta.url).href;
export const STEP_VOCAB = ['<|endoftext|>', ...'abcdefghijklmnopqrstuvwxyz .,#!'];
export const CRASH_CHAR = '#';
export const FAIL_CHAR = '!';

interface HashState {
  readonly seen: number[];
  released: boolean;
}

export class HashStepDecoder implements StepDecoder<HashState> {
  readonly cacheBytesPerToken = 8;
  open = (): HashState => ({ seen: [], released: false });

  constructor(
    readonly vocabSize: number,
    readonly maxSequenceLength: number,
    private readonly stepMs = 0,
  ) {}

  async step(entries: readonly StepEntry<HashState>[]): Promise<readonly Float32Array[]> {
    if (new Set(entries.map((e) => e.state)).size !== entries.length)
      throw new Error('a state was fed twice in one step');
    const fed = entries.flatMap((e) => e.tokens);
    if (fed.includes(STEP_VOCAB.indexOf(CRASH_CHAR)) && !isMainThread) process.exit(3);
    if (fed.includes(STEP_VOCAB.indexOf(FAIL_CHAR)))
      throw new KilnError(KilnErrorCode.EngineError, 'the step engine refused "!"');
    if (this.stepMs > 0) await new Promise((resolve) => setTimeout(resolve, this.stepMs));
    return entries.map(({ state, tokens }) => {
      if (state.released) throw new Error('a released state was fed');
      state.seen.push(...tokens);
      return hashLogits(state.seen, this.vocabSize);
    });
  }

  release(state: HashState): void {
    state.released = true;
  }
}

/**
 * Logits from a hash of the tokens seen; the crash and fail characters never win, and the end
 * of text seldom does (tests want long answers).
 */
function hashLogits(seen: readonly number[], vocab: number): Float32Array {
  let h = 2166136261;
  for (const t of seen) h = Math.imul(h ^ t, 16777619) >>> 0;
  const out = new Float32Array(vocab);
  for (let i = 0; i < out.length; i++) {
    h = Math.imul(h ^ (i + 1), 2246822519) >>> 0;
    out[i] = (h % 1000) / 100;
  }
  out[0]! -= 5;
  out[STEP_VOCAB.indexOf(CRASH_CHAR)] = -100;
  out[STEP_VOCAB.indexOf(FAIL_CHAR)] = -100;
  return out;
}

async function loadStepModel(request: ModelLoadRequest): Promise<Model> {
  const file = path.join(request.modelDir, STEP_MODEL_FILE);
  const { maxSequenceLength } = JSON.parse(await readFile(file, 'utf8')) as {
    maxSequenceLength: number;
  };
  const stepMs = Number(request.options.stepMs ?? 0);
  return {
    name: request.name,
    engine: 'TestStep',
    device: request.device,
    modelDir: request.modelDir,
    inputs: [],
    outputs: [],
    properties: request.properties,
    describe: () => ({ maxSequenceLength }),
    newExecutionContext: () =>
      Promise.reject(new KilnError(KilnErrorCode.InvalidConfig, 'the step engine only steps')),
    newStepDecoder: async () => new HashStepDecoder(STEP_VOCAB.length, maxSequenceLength, stepMs),
    async dispose() {},
  };
}

export const provider: EngineProvider = {
  specificationVersion: ENGINE_SPECIFICATION_VERSION,
  name: 'TestStep',
  rank: 1,
  workerKinds: ['forward', 'step'],
  recognizes: (fileNames) => fileNames.includes(STEP_MODEL_FILE),
  async load(): Promise<Engine> {
    return {
      name: 'TestStep',
      version: '1.0.0',
      devices: () => [CPU],
      describe: () => ({}),
      loadModel: loadStepModel,
    };
  },
};

/** Writes a step model folder with rolling batching on and the given serving.properties keys. */
export async function writeStepModel(
  properties: Record<string, string> = {},
  maxSequenceLength = 512,
): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-step-'));
  await writeFile(path.join(dir, STEP_MODEL_FILE), JSON.stringify({ maxSequenceLength }));
  await writeFile(path.join(dir, 'vocab.json'), JSON.stringify(STEP_VOCAB));
  const lines = Object.entries({
    engine: 'TestStep',
    'option.rolling_batch': 'auto',
    ...properties,
  }).map(([k, v]) => `${k}=${v}`);
  await writeFile(path.join(dir, 'serving.properties'), `${lines.join('\n')}\n`);
  return dir;
}
