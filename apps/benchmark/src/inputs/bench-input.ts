import type { ServingInput } from '@kiln/core';
import { modelSignature } from '../inprocess/model-pool.js';
import { type InputSpec, formatShapes } from '../options/shapes.js';
import { specsFromSignature, syntheticTensors } from './synthetic-tensors.js';

/** A request body given as a file, sent as it is. */
export interface InputFile {
  readonly name: string;
  readonly body: Uint8Array;
  readonly contentType?: string | undefined;
}

export interface BenchInputOptions {
  readonly url: string;
  readonly engine?: string | undefined;
  readonly overrides?: Readonly<Record<string, string>> | undefined;
  readonly inputs?: readonly InputSpec[] | undefined;
  readonly inputFile?: InputFile | undefined;
}

/** What an in-process run sends with every request, and how reports name it. */
export interface BenchInput {
  readonly value: ServingInput;
  readonly label: string;
}

/**
 * The input of in-process runs: the file's body when one is given, else synthetic tensors
 * of the `-s` shapes, else of the model's own signature (dynamic dimensions as 1).
 */
export async function benchInput(options: BenchInputOptions): Promise<BenchInput> {
  if (options.inputFile) {
    const { body, contentType, name } = options.inputFile;
    return { value: { body, ...(contentType ? { contentType } : {}) }, label: name };
  }
  const specs = options.inputs ?? specsFromSignature(await modelSignature(options.url, options));
  return { value: { tensors: syntheticTensors(specs) }, label: formatShapes(specs) };
}
