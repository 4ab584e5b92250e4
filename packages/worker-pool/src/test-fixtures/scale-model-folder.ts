import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MODEL_FILE } from './scale-engine.js';

/** The engine module thread workers register for the scale model. */
export const SCALE_ENGINE_MODULE = new URL('./scale-engine.ts', import.meta.url).href;
/** The same engine, loading its models on the calling thread (an async engine). */
export const ASYNC_SCALE_ENGINE_MODULE = new URL('./async-scale-engine.ts', import.meta.url).href;
/** The translator module for JSON vector bodies. */
export const JSON_TRANSLATOR_MODULE = new URL('./json-translator.ts', import.meta.url).href;

/** Writes a scale model folder (`y = x · factor`) with the given serving.properties keys. */
export async function writeScaleModel(
  factor: number,
  properties: Record<string, string> = {},
): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-scale-'));
  await writeFile(path.join(dir, MODEL_FILE), JSON.stringify({ factor }));
  const lines = Object.entries({ engine: 'TestScale', ...properties }).map(([k, v]) => `${k}=${v}`);
  await writeFile(path.join(dir, 'serving.properties'), `${lines.join('\n')}\n`);
  return dir;
}
