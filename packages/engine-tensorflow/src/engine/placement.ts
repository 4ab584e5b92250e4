import type { ModelLoadRequest } from '@kiln/core';
import type { TfModelSpec } from '../model/load-model.js';
import type { TfRuntimeFacts } from '../runtime/resolve-runtime.js';
import type { TfModelBase } from './model-base.js';

/** Where an engine's models run: in this thread, or in host threads it starts. */
export interface TfPlacement {
  readonly facts: TfRuntimeFacts;
  /** One line for Engine.describe(). */
  readonly description: string;
  loadModel(spec: TfModelSpec, request: ModelLoadRequest): Promise<TfModelBase>;
}
