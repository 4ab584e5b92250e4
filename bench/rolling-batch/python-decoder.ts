// The Llama-style torch decoder of python-decoder/model.py, served as a Python step handler
// (option.rolling_batch): its folder, and a step decoder over it in this process.
import { spawnSync } from 'node:child_process';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseDevice, parseServingProperties } from '@kiln/core';
import { createPythonEngine, type PythonModel, type PythonStepDecoder } from '@kiln/engine-python';
import type { BenchModel } from './bench-model.js';

/** The parseArgs options of the Python decoder (with BENCH_MODEL_OPTIONS' sizes). */
export const PYTHON_DECODER_OPTIONS = {
  /** The Llama-style torch decoder in a Python step handler instead of an ONNX one. */
  python: { type: 'boolean', default: false },
  /** Where the Python decoder runs: cpu, or gpu0, gpu1… (the CPU where torch sees no GPU). */
  device: { type: 'string', default: 'cpu' },
  'kv-heads': { type: 'string', default: '1' },
  vocab: { type: 'string', default: '4096' },
  /** The Python the handler runs in: by default the first of $KILN_BENCH_PYTHON, python3, /usr/bin/python3 that imports torch. */
  'python-executable': { type: 'string', default: pythonWithTorch() ?? 'python3' },
} as const;

interface PythonDecoderValues {
  readonly layers: string;
  readonly hidden: string;
  readonly heads: string;
  readonly 'kv-heads': string;
  readonly vocab: string;
  readonly device: string;
  readonly 'python-executable': string;
}

/**
 * The decoder's folder in `root`: model.py, a vocab.json of `vocab` characters (CJK ideographs
 * after a space; the bench's prompts are random token ids), and serving.properties with its
 * sizes, device and Python.
 */
export async function pythonDecoderFolder(
  root: string,
  values: PythonDecoderValues,
): Promise<BenchModel> {
  const dir = join(root, 'python-decoder');
  await mkdir(dir, { recursive: true });
  await copyFile(new URL('./python-decoder/model.py', import.meta.url), join(dir, 'model.py'));
  const vocab = Array.from({ length: Number(values.vocab) }, (_, i) =>
    i === 0 ? ' ' : String.fromCodePoint(0x4e00 + i),
  );
  await writeFile(join(dir, 'vocab.json'), JSON.stringify(vocab));
  const sizes = { layers: values.layers, hidden: values.hidden, heads: values.heads };
  await writeFile(
    join(dir, 'serving.properties'),
    [
      'engine=Python',
      `load_on_devices=${values.device}`,
      `option.pythonExecutable=${values['python-executable']}`,
      ...Object.entries({ ...sizes, kv_heads: values['kv-heads'], max_len: '512' }).map(
        ([key, value]) => `option.${key}=${value}`,
      ),
    ].join('\n'),
  );
  return {
    dir,
    description: `a Llama-style torch decoder in a Python step handler (random weights, ${values.layers} layers, hidden ${values.hidden}, ${values.heads} heads / ${values['kv-heads']} key-value heads, vocabulary ${values.vocab}) on ${values.device}`,
  };
}

/** A step decoder over the folder's handler in this process, on `device`. */
export async function pythonStepDecoder(dir: string, device: string): Promise<PythonStepDecoder> {
  const properties = parseServingProperties(
    await readFile(join(dir, 'serving.properties'), 'utf8'),
  );
  const engine = await createPythonEngine().load();
  const model = (await engine.loadModel({
    name: 'python-decoder',
    modelDir: dir,
    device: parseDevice(device),
    options: { ...properties.options, rolling_batch: 'auto' },
    properties,
  })) as PythonModel;
  const decoder = await model.newStepDecoder();
  const close = decoder.close.bind(decoder);
  // Closing the decoder closes its model too: the bench holds no other handle on it.
  return Object.assign(decoder, {
    close: async () => {
      await close();
      await model.dispose();
    },
  });
}

/** The first of $KILN_BENCH_PYTHON, python3, /usr/bin/python3 that imports torch. */
export function pythonWithTorch(): string | undefined {
  const candidates = [process.env.KILN_BENCH_PYTHON, 'python3', '/usr/bin/python3'];
  return candidates.find(
    (python) => python && spawnSync(python, ['-c', 'import torch']).status === 0,
  );
}
