import { execFileSync } from 'node:child_process';
import { CPU, type Device, type Engine, type ModelLoadRequest } from '@kiln/core';
import { defaultPythonExecutable } from './options.js';
import { ENGINE_NAME, PythonModel } from './python-model.js';

/** DJL Serving's Python mode: model.py + handle(inputs), one Python process per worker. */
export class PythonEngine implements Engine {
  readonly name = ENGINE_NAME;
  readonly version: string;

  constructor(private readonly pythonExecutable = defaultPythonExecutable()) {
    this.version = execFileSync(
      pythonExecutable,
      ['-c', 'import platform; print(platform.python_version())'],
      {
        encoding: 'utf8',
        timeout: 30_000,
      },
    ).trim();
  }

  devices(): readonly Device[] {
    return [CPU];
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
