import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { CPU, type Device, type Engine, type ModelLoadRequest } from '@kiln/core';
import { defaultPythonExecutable } from './options.js';
import { ENGINE_NAME, PythonModel } from './python-model.js';

/** DJL Serving's Python mode: model.py + handle(inputs), one Python process per worker. */
export class PythonEngine implements Engine {
  readonly name = ENGINE_NAME;
  readonly version: string;

  private readonly gpus: readonly Device[];

  constructor(
    private readonly pythonExecutable = defaultPythonExecutable(),
    gpuCount = visibleGpuCount(),
  ) {
    this.gpus = Array.from({ length: gpuCount }, (_, id): Device => ({ type: 'gpu', id }));
    this.version = execFileSync(
      pythonExecutable,
      ['-c', 'import platform; print(platform.python_version())'],
      {
        encoding: 'utf8',
        timeout: 30_000,
      },
    ).trim();
  }

  /** The CPU, and each NVIDIA GPU visible here: a handler gets its index as `device_id`. */
  devices(): readonly Device[] {
    return [CPU, ...this.gpus];
  }

  describe(): Record<string, unknown> {
    return {
      runtime: 'CPython',
      pythonExecutable: this.pythonExecutable,
      pythonVersion: this.version,
    };
  }

  loadModel(request: ModelLoadRequest): Promise<PythonModel> {
    return PythonModel.load(request);
  }
}

/**
 * NVIDIA GPUs this process may use, counted without starting CUDA (the handler's framework does
 * that): the driver's `/dev/nvidiaN` nodes, or as many as CUDA_VISIBLE_DEVICES names.
 */
export function visibleGpuCount(
  env: NodeJS.ProcessEnv = process.env,
  deviceFiles: () => readonly string[] = () => readdirSync('/dev'),
): number {
  let nodes: number;
  try {
    nodes = deviceFiles().filter((name) => /^nvidia\d+$/.test(name)).length;
  } catch {
    return 0;
  }
  const visible = env.CUDA_VISIBLE_DEVICES;
  if (visible === undefined) return nodes;
  // CUDA stops at the first entry that is not a device ("-1" hides them all).
  const listed = visible.split(',').map((entry) => entry.trim());
  const usable = listed.findIndex((entry) => !/^(\d+|GPU-[\w-]+|MIG-[\w/-]+)$/.test(entry));
  return Math.min(nodes, usable === -1 ? listed.length : usable);
}
