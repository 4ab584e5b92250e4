import { KilnError, KilnErrorCode } from '../errors.js';
import { type DType, type DTypeStorage, type NumericDType, allocate } from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import { type AnyTensor, Tensor } from '../tensor/tensor.js';
import type { Batch, Batchifier } from './batchifier.js';

/**
 * DJL's stack batchifier, for tensors that already carry a batch axis (what clients send):
 * inputs whose tensors agree in count, names, dtypes and all but the first dimension are
 * joined along axis 0, and the output is split back by each input's share of the rows.
 */
export class StackBatchifier implements Batchifier {
  readonly name = 'stack';

  canBatch(inputs: readonly NDList[]): boolean {
    const first = inputs[0];
    if (!first) return false;
    // Called for every request a batch admits (the Predictor groups its inputs with it), so it
    // compares in place rather than slicing shapes.
    for (const list of inputs) {
      if (list.length !== first.length) return false;
      for (let i = 0; i < list.length; i++) {
        if (!stackable(list.tensors[i]!, first.tensors[i]!)) return false;
      }
    }
    return true;
  }

  batchify(inputs: readonly NDList[]): Batch {
    if (!this.canBatch(inputs)) {
      throw new KilnError(
        KilnErrorCode.ShapeMismatch,
        'inputs differ in count, dtype or shape and cannot be stacked',
      );
    }
    if (inputs.length === 1) return { input: inputs[0]!, unbatchify: (output) => [output] };
    const counts = inputs.map((list) => list.tensors[0]?.shape[0] ?? 1);
    const columns = inputs[0]!.tensors.map((_, i) =>
      concat(inputs.map((list) => list.tensors[i]!)),
    );
    return {
      input: new NDList(columns),
      unbatchify: (output) => splitOutputs(output, counts),
    };
  }
}

/** Same dtype, name and dimensions after the first: the two can be joined along axis 0. */
function stackable(t: AnyTensor, ref: AnyTensor): boolean {
  if (t.dtype !== ref.dtype || t.name !== ref.name || t.rank === 0 || t.rank !== ref.rank) {
    return false;
  }
  for (let d = 1; d < t.rank; d++) if (t.shape[d] !== ref.shape[d]) return false;
  return true;
}

/** Joins tensors along axis 0. */
export function concat(tensors: readonly AnyTensor[]): AnyTensor {
  const first = tensors[0]!;
  const rows = tensors.reduce((sum, t) => sum + t.shape[0]!, 0);
  const dtype = first.dtype;
  const total = tensors.reduce((sum, t) => sum + t.size, 0);
  const data = allocate(dtype, total);
  let offset = 0;
  for (const t of tensors) {
    if (dtype === 'string') {
      const target = data as string[];
      (t.data as string[]).forEach((v, i) => (target[offset + i] = v));
    } else {
      (data as DTypeStorage[NumericDType]).set(t.data as never, offset);
    }
    offset += t.size;
  }
  return new Tensor(
    dtype,
    data as DTypeStorage[DType],
    [rows, ...first.shape.slice(1)],
    first.name,
  );
}

/** Splits tensors along axis 0 into pieces of `counts` rows each (views, no copies). */
export function splitRows(tensor: AnyTensor, counts: readonly number[]): AnyTensor[] {
  const rows = tensor.shape[0];
  const expected = counts.reduce((a, b) => a + b, 0);
  if (rows !== expected) {
    throw new KilnError(
      KilnErrorCode.ShapeMismatch,
      `output ${tensor.name ?? ''} has ${rows ?? 'no'} rows but the batch held ${expected}`,
    );
  }
  const rowSize = rows === 0 ? 0 : tensor.size / rows;
  let start = 0;
  return counts.map((count) => {
    const begin = start * rowSize;
    const end = (start + count) * rowSize;
    start += count;
    const data =
      tensor.dtype === 'string'
        ? (tensor.data as string[]).slice(begin, end)
        : (tensor.data as Float32Array).subarray(begin, end);
    return new Tensor(
      tensor.dtype,
      data as DTypeStorage[DType],
      [count, ...tensor.shape.slice(1)],
      tensor.name,
    );
  });
}

function splitOutputs(output: NDList, counts: readonly number[]): NDList[] {
  const columns = output.tensors.map((t) => splitRows(t, counts));
  return counts.map((_, i) => new NDList(columns.map((pieces) => pieces[i]!)));
}
