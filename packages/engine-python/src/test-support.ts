import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CPU, parseServingProperties } from '@kiln/core';
import { createPythonEngine } from './provider.js';
import type { PythonModel } from './python-model.js';

/** The interpreter the engine's tests run: Debian's, which has numpy and torch. */
export const TEST_PYTHON = '/usr/bin/python3';

/**
 * Loads `source` as the model.py of a fresh model folder through the engine, with
 * serving.properties text and engine options (which win over the properties' option.*).
 * Folders are removed by `removeTestModels`.
 */
export async function loadTestModel(
  source: string,
  options: Record<string, string> = {},
  servingProperties = '',
): Promise<PythonModel> {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-python-'));
  folders.push(dir);
  writeFileSync(join(dir, 'model.py'), source);
  const engine = await createPythonEngine({ pythonExecutable: TEST_PYTHON }).load();
  const properties = parseServingProperties(servingProperties);
  return (await engine.loadModel({
    name: 'm',
    modelDir: dir,
    device: CPU,
    options: { pythonExecutable: TEST_PYTHON, ...properties.options, ...options },
    properties,
  })) as PythonModel;
}

const folders: string[] = [];

/** Removes the folders loadTestModel made (call from afterAll). */
export function removeTestModels(): void {
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
}
