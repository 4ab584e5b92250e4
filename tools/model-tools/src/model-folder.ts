import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { OnnxModel } from './graph-builder.js';
import { saveOnnxModel } from './save-model.js';

export const MODEL_FILE = 'model.onnx';

/**
 * Writes a model folder as Kiln and DJL Serving expect it: `model.onnx` and a
 * `serving.properties` (engine=OnnxRuntime plus `properties`). Returns the folder.
 */
export async function writeModelFolder(
  dir: string,
  model: OnnxModel,
  properties: Readonly<Record<string, string>> = {},
): Promise<string> {
  await mkdir(dir, { recursive: true });
  await saveOnnxModel(join(dir, MODEL_FILE), model);
  const lines = Object.entries({ engine: 'OnnxRuntime', ...properties }).map(
    ([k, v]) => `${k}=${v}`,
  );
  await writeFile(join(dir, 'serving.properties'), `${lines.join('\n')}\n`);
  return dir;
}
