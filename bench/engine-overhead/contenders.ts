import { type Model, type NDList, Predictor, type Translator } from '@kiln/core';
import type { InferenceSession, Tensor as OrtTensor } from 'onnxruntime-node';
import type { Contender } from '../harness/interleave.js';

/** Tensors in, tensors out: the cheapest translator, so that only the engine path is timed. */
const rawTensors: Translator<NDList, NDList> = {
  batchifier: null,
  processInput: (_ctx, input) => input,
  processOutput: (_ctx, output) => output,
};

/** A plain onnxruntime-node loop: what an application would write without Kiln. */
export function rawOrtContender(
  name: string,
  session: InferenceSession,
  feeds: Record<string, OrtTensor>,
): Contender {
  return { name, call: () => session.run(feeds) };
}

/** Kiln's Predictor over a model's execution context, as a server worker runs it. */
export async function kilnContender(
  name: string,
  model: Model,
  input: NDList,
): Promise<Contender & { close(): Promise<void> }> {
  const predictor = await Predictor.create(model, rawTensors);
  return { name, call: () => predictor.predict(input), close: () => predictor.close() };
}
