import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CPU, type Device, type ModelLoadRequest, servingPropertiesFrom } from '@kiln/core';

/** A load request for a model folder, as Kiln's loader would make it. */
export function loadRequest(
  modelDir: string,
  options: Record<string, string> = {},
  device: Device = CPU,
): ModelLoadRequest {
  const raw = Object.fromEntries(Object.entries(options).map(([k, v]) => [`option.${k}`, v]));
  return {
    name: path.basename(modelDir),
    modelDir,
    device,
    options,
    properties: servingPropertiesFrom(raw),
  };
}

/** A fresh temporary folder and the function that removes it. */
export function temporaryFolder(prefix: string): { dir: string; remove: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kiln-tf-${prefix}-`));
  return { dir, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}
