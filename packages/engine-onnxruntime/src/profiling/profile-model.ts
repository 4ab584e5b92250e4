import { stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { CPU, type NDList, servingPropertiesFrom } from '@kiln/core';
import { OrtModel, type OrtModelSettings } from '../ort-model.js';
import type { OrtProfile } from './ort-profile.js';
import { type SyntheticInputOptions, syntheticInputs } from './synthetic-inputs.js';

export interface ProfileModelOptions extends SyntheticInputOptions, OrtModelSettings {
  /** Inputs to run; synthetic ones fitting the model's signature by default. */
  readonly inputs?: NDList;
  /** Runs counted in the profile. */
  readonly runs?: number;
  /** Runs before those, left out of the profile (first runs allocate). */
  readonly warmup?: number;
  /** `option.*` settings (prefix removed), e.g. `{ optLevel: 'basic', intraOpNumThreads: '1' }`. */
  readonly options?: Readonly<Record<string, string>>;
}

/**
 * Runs a model with ONNX Runtime's profiler on and returns where the time went, node by
 * node and operator by operator: the data behind a per-layer profile report.
 * `model` is a model folder or an .onnx file.
 */
export async function profileModel(
  model: string,
  options: ProfileModelOptions = {},
): Promise<OrtProfile> {
  const isFile = (await stat(model)).isFile();
  const modelDir = isFile ? dirname(model) : model;
  const loaded = await OrtModel.load(
    {
      name: basename(modelDir),
      modelDir,
      ...(isFile ? { modelFile: basename(model) } : {}),
      device: CPU,
      options: { ...options.options, profiling: 'true' },
      properties: servingPropertiesFrom({}),
    },
    options,
  );
  try {
    const context = await loaded.newExecutionContext();
    const inputs = options.inputs ?? syntheticInputs(loaded.inputs, options);
    const warmup = options.warmup ?? 2;
    const runs = options.runs ?? 10;
    for (let i = 0; i < warmup + runs; i++) await context.forward(inputs);
    return await context.endProfiling({ skipRuns: warmup });
  } finally {
    await loaded.dispose();
  }
}
