import { NDList, StackBatchifier, Tensor, type Translator } from '@kiln/core';
import { PadBatchifier } from '@kiln/batching';
import type { SequenceRequest } from './workload.js';

/** The encoder's output for one request: `length × hidden` values, row-major. */
export interface Encoding {
  readonly length: number;
  readonly hidden: Float32Array;
}

function encoderInputs(ids: BigInt64Array, length: number): NDList {
  const padded = new BigInt64Array(length);
  padded.set(ids);
  const mask = new BigInt64Array(length).fill(1n, 0, ids.length);
  return NDList.of(
    new Tensor('int64', padded, [1, length], 'input_ids'),
    new Tensor('int64', mask, [1, length], 'attention_mask'),
  );
}

/** The first `length` rows of a `[1, L, hidden]` output. */
function encoding(output: NDList, length: number): Encoding {
  const state = output.get('last_hidden_state');
  const hidden = state.shape[2]!;
  return { length, hidden: (state.data as Float32Array).slice(0, length * hidden) };
}

/**
 * Sends each sequence at its own length; PadBatchifier pads a batch to its longest member and
 * cuts every output back to its own length.
 */
export function paddedBatchTranslator(): Translator<SequenceRequest, Encoding> {
  return {
    batchifier: new PadBatchifier({ padValue: { input_ids: 0, attention_mask: 0 } }),
    processInput: (_ctx, request) => encoderInputs(request.ids, request.ids.length),
    processOutput: (_ctx, output, request) => encoding(output, request.ids.length),
  };
}

/**
 * The baseline: every sequence padded to the model's maximum length, as a fixed-shape model
 * needs, and stacked; the output is cut back by the translator.
 */
export function maxLengthTranslator(maxLength: number): Translator<SequenceRequest, Encoding> {
  return {
    batchifier: new StackBatchifier(),
    processInput: (_ctx, request) => encoderInputs(request.ids, maxLength),
    processOutput: (_ctx, output, request) => encoding(output, request.ids.length),
  };
}
