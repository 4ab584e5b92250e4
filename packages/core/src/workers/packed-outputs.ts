import { KilnError, KilnErrorCode } from '../errors.js';
import { type DType, type TypedArray, isDType } from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import { type AnyTensor, Tensor } from '../tensor/tensor.js';
import type { ServingOutput } from '../translate/serving-io.js';

/**
 * A batch's answers when every one is plain tensors of the same names, dtypes and ranks (what a
 * tensor model's batch gives): column by column instead of answer by answer. Each output's rows
 * of the whole batch lie in one array, each answer's shape in one flat list, so a message of a
 * batch of 32 carries a few arrays, not 32 answers of nested objects each cloned on its own.
 */
export interface PackedOutputs {
  readonly names: readonly (string | undefined)[];
  readonly dtypes: readonly DType[];
  readonly ranks: readonly number[];
  /** Every answer's shapes, answer after answer, output after output, dims after dims. */
  readonly dims: readonly number[];
  /** Per output, the elements of every answer, answer after answer. */
  readonly data: readonly TypedArray[];
  readonly answers: number;
}

type TypedArrayConstructor = new (length: number) => TypedArray;

/**
 * Packs `outputs`, or undefined when they are not all plain tensors of one layout (headers, a
 * status, strings, other kinds): those go answer by answer. Copies each row once into its
 * output's array, which the message then moves.
 */
export function packServingOutputs(outputs: readonly ServingOutput[]): PackedOutputs | undefined {
  const first = outputs[0];
  if (first?.type !== 'tensors' || first.headers || first.status) return undefined;
  const columns = first.tensors.tensors;
  const names = columns.map((t) => t.name);
  const dtypes = columns.map((t) => t.dtype);
  const ranks = columns.map((t) => t.shape.length);
  const totals = columns.map(() => 0);
  for (const output of outputs) {
    if (output.type !== 'tensors' || output.headers || output.status) return undefined;
    const tensors = output.tensors.tensors;
    if (tensors.length !== columns.length) return undefined;
    for (let k = 0; k < tensors.length; k++) {
      const tensor = tensors[k]!;
      if (
        tensor.name !== names[k] ||
        tensor.dtype !== dtypes[k] ||
        tensor.shape.length !== ranks[k] ||
        Array.isArray(tensor.data)
      )
        return undefined;
      totals[k]! += (tensor.data as TypedArray).length;
    }
  }
  const data = columns.map((t, k) => {
    const kind = (globalThis as unknown as Record<string, TypedArrayConstructor>)[
      (t.data as TypedArray)[Symbol.toStringTag]
    ]!;
    return new kind(totals[k]!);
  });
  const offsets = columns.map(() => 0);
  const dims: number[] = [];
  for (const output of outputs) {
    const tensors = (output as { tensors: NDList }).tensors.tensors;
    for (let k = 0; k < tensors.length; k++) {
      const tensor = tensors[k]!;
      const values = tensor.data as TypedArray;
      (data[k] as { set(values: TypedArray, offset: number): void }).set(values, offsets[k]!);
      offsets[k]! += values.length;
      for (const d of tensor.shape) dims.push(d);
    }
  }
  return { names, dtypes, ranks, dims, data, answers: outputs.length };
}

/** The answers `packed` holds, each a view of its rows; a malformed one is an Internal error. */
export function unpackServingOutputs(packed: PackedOutputs): ServingOutput[] {
  const { names, dtypes, ranks, dims, data, answers } = packed;
  if (
    names.length !== dtypes.length ||
    ranks.length !== dtypes.length ||
    data.length !== dtypes.length ||
    !dtypes.every(isDType)
  )
    throw malformed('its columns disagree');
  const outputs: ServingOutput[] = [];
  const offsets = dtypes.map(() => 0);
  let at = 0;
  for (let i = 0; i < answers; i++) {
    const tensors: AnyTensor[] = [];
    for (let k = 0; k < dtypes.length; k++) {
      const shape = dims.slice(at, at + ranks[k]!);
      if (shape.length !== ranks[k]) throw malformed('it has fewer shapes than answers');
      at += ranks[k]!;
      const size = shape.reduce((a, b) => a * b, 1);
      const column = data[k]!;
      if (offsets[k]! + size > column.length) throw malformed('its shapes outgrow its data');
      const values = column.subarray(offsets[k]!, offsets[k]! + size);
      offsets[k]! += size;
      tensors.push(new Tensor(dtypes[k]!, values as never, shape, names[k]));
    }
    outputs.push({ type: 'tensors', tensors: new NDList(tensors) });
  }
  return outputs;
}

function malformed(why: string): KilnError {
  return new KilnError(KilnErrorCode.Internal, `the worker sent packed answers that ${why}`);
}
