import { KilnError, KilnErrorCode } from '../errors.js';
import { type DType, type TypedArray, isDType, typedArrayKind } from '../tensor/dtype.js';
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

/**
 * Packs `outputs`, or undefined when they are not all plain tensors of one layout (headers, a
 * status, strings, other kinds): those go answer by answer. An output whose answers are, in
 * order, views that together span their whole buffer (a batch's output split into rows) is
 * that buffer as it is; any other is copied once into an array of its own. With `copy`, every
 * output is copied (a buffer that refused to move).
 */
export function packServingOutputs(
  outputs: readonly ServingOutput[],
  options: { readonly copy?: boolean } = {},
): PackedOutputs | undefined {
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
  const answers = outputs.map((output) => (output as { tensors: NDList }).tensors.tensors);
  const data = columns.map((_, k) => {
    const views = answers.map((tensors) => tensors[k]!.data as TypedArray);
    const whole = options.copy ? undefined : wholeBufferOf(views);
    if (whole) return whole;
    const column = new (typedArrayKind(views[0]!))(totals[k]!);
    let offset = 0;
    for (const view of views) {
      (column as { set(values: TypedArray, offset: number): void }).set(view, offset);
      offset += view.length;
    }
    return column;
  });
  const dims: number[] = [];
  for (const tensors of answers) for (const tensor of tensors) dims.push(...tensor.shape);
  return { names, dtypes, ranks, dims, data, answers: outputs.length };
}

/** One view of the buffer `views` span end to end, in order, when they span all of it. */
function wholeBufferOf(views: readonly TypedArray[]): TypedArray | undefined {
  const buffer = views[0]!.buffer;
  if (!(buffer instanceof ArrayBuffer)) return undefined;
  let end = 0;
  for (const view of views) {
    if (view.buffer !== buffer || view.byteOffset !== end) return undefined;
    end += view.byteLength;
  }
  if (end !== buffer.byteLength) return undefined;
  const kind = typedArrayKind(views[0]!);
  return new kind(buffer, 0, end / kind.BYTES_PER_ELEMENT);
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
