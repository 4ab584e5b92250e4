import {
  type AnyTensor,
  type Batch,
  type Batchifier,
  KilnError,
  KilnErrorCode,
  NDList,
  type Shape,
  Tensor,
  shapeSize,
  splitRows,
} from '@kiln/core';
import { copyBlock, cropTensor, filledStorage, storedPadValue } from './tensor-blocks.js';

export interface PadBatchifierOptions {
  /** Dimensions that may differ and are padded (never 0, the batch axis); default: all. */
  axes?: readonly number[];
  /** What padding holds: one value, or one per input name (others get 0). Default 0. */
  padValue?: number | Readonly<Record<string, number>>;
  /**
   * Name of an int64 [rows] input holding each row's true length along `lengthsAxis` of the
   * first input tensor. Written for every batch, replacing one the inputs carry.
   */
  lengthsInput?: string;
  /** Axis whose lengths `lengthsInput` carries; default the first of `axes`, else 1. */
  lengthsAxis?: number;
  /**
   * Output axes to cut back to each item's true length, per output name. An axis listed is
   * cut when its size equals a padded input length. Default: an output axis is cut when the
   * input axis of the same index was padded and the sizes agree.
   */
  outputAxes?: Readonly<Record<string, readonly number[]>>;
  /** Largest padded tensor, in elements; bigger batches are split instead. Default 2^26. */
  maxPaddedElements?: number;
}

/** One padded input axis: its padded size and each item's true size. */
interface PaddedAxis {
  readonly axis: number;
  readonly size: number;
  readonly lengths: readonly number[];
}

/**
 * Batches inputs whose tensors differ in non-batch dimensions (sequence lengths, image
 * sizes) by padding each to the batch maximum, and cuts the padding off the outputs again.
 * Inputs must agree in tensor count, names, dtypes and ranks, and in every axis that is not
 * padded. Like StackBatchifier, each tensor's axis 0 is its rows.
 */
export class PadBatchifier implements Batchifier {
  readonly name = 'pad';
  private readonly axes: ReadonlySet<number> | undefined;
  private readonly lengthsAxis: number;
  private readonly maxPaddedElements: number;

  constructor(private readonly options: PadBatchifierOptions = {}) {
    const { axes, padValue, lengthsAxis, maxPaddedElements } = options;
    for (const axis of axes ?? []) {
      if (!Number.isSafeInteger(axis) || axis < 1)
        throw invalid(`pad axes must be integers ≥ 1, got ${axis}`);
    }
    const values = typeof padValue === 'object' ? Object.values(padValue) : [padValue ?? 0];
    for (const value of values) {
      if (typeof value !== 'number' || Number.isNaN(value))
        throw invalid(`pad value must be a number, got ${value}`);
    }
    this.axes = axes ? new Set(axes) : undefined;
    this.lengthsAxis = lengthsAxis ?? axes?.[0] ?? 1;
    if (!Number.isSafeInteger(this.lengthsAxis) || this.lengthsAxis < 1) {
      throw invalid(`lengthsAxis must be an integer ≥ 1, got ${this.lengthsAxis}`);
    }
    this.maxPaddedElements = maxPaddedElements ?? 2 ** 26;
    if (!Number.isSafeInteger(this.maxPaddedElements) || this.maxPaddedElements < 1) {
      throw invalid(`maxPaddedElements must be an integer ≥ 1, got ${maxPaddedElements}`);
    }
  }

  canBatch(inputs: readonly NDList[]): boolean {
    return this.mismatch(inputs) === undefined;
  }

  batchify(inputs: readonly NDList[]): Batch {
    const reason = this.mismatch(inputs);
    if (reason !== undefined)
      throw new KilnError(
        KilnErrorCode.ShapeMismatch,
        `cannot pad inputs into one batch: ${reason}`,
      );
    const lists = inputs.map((list) => this.payload(list));
    const counts = lists.map((tensors) => tensors[0]!.shape[0]!);
    const padded: PaddedAxis[] = [];
    const columns = lists[0]!.map((_, i) =>
      this.padColumn(
        lists.map((tensors) => tensors[i]!),
        padded,
      ),
    );
    if (this.options.lengthsInput !== undefined) columns.push(this.lengthsTensor(lists, counts));
    return {
      input: new NDList(columns),
      unbatchify: (output) => (lists.length === 1 ? [output] : this.unpad(output, counts, padded)),
    };
  }

  /** Why the inputs cannot share one padded batch, or undefined when they can. */
  private mismatch(inputs: readonly NDList[]): string | undefined {
    if (inputs.length === 0) return 'no inputs';
    const lists = inputs.map((list) => this.payload(list));
    const first = lists[0]!;
    if (first.length === 0) return 'inputs hold no tensors';
    if (this.options.lengthsInput !== undefined && first[0]!.rank <= this.lengthsAxis) {
      return `the first tensor has no axis ${this.lengthsAxis} to take lengths from`;
    }
    for (const tensors of lists) {
      if (tensors.length !== first.length) return 'inputs hold different numbers of tensors';
      for (let i = 0; i < tensors.length; i++) {
        const t = tensors[i]!;
        const ref = first[i]!;
        if (t.name !== ref.name || t.dtype !== ref.dtype || t.rank !== ref.rank || t.rank === 0) {
          return `tensor ${i} differs in name, dtype or rank, or has no batch axis`;
        }
        for (let axis = 1; axis < t.rank; axis++) {
          if (t.shape[axis] !== ref.shape[axis] && !this.pads(axis))
            return `tensor ${i} differs in axis ${axis}, which is not padded`;
        }
      }
    }
    for (let i = 0; i < first.length; i++) {
      const elements = shapeSize(batchShape(lists.map((tensors) => tensors[i]!)));
      if (elements > this.maxPaddedElements)
        return `tensor ${i} would pad to ${elements} elements (limit ${this.maxPaddedElements})`;
    }
    return undefined;
  }

  private pads(axis: number): boolean {
    return this.axes === undefined || this.axes.has(axis);
  }

  /** The tensors to pad: all but a lengths input the translator may have supplied. */
  private payload(list: NDList): readonly AnyTensor[] {
    const name = this.options.lengthsInput;
    return name === undefined ? list.tensors : list.tensors.filter((t) => t.name !== name);
  }

  private padValue(name: string | undefined): number {
    const value = this.options.padValue;
    if (typeof value === 'number') return value;
    return (name !== undefined ? value?.[name] : undefined) ?? 0;
  }

  /** Pads one tensor of every input to the batch maximum and stacks the rows. */
  private padColumn(tensors: readonly AnyTensor[], padded: PaddedAxis[]): AnyTensor {
    const ref = tensors[0]!;
    const shape = batchShape(tensors);
    for (let axis = 1; axis < shape.length; axis++) {
      const lengths = tensors.map((t) => t.shape[axis]!);
      if (lengths.some((n) => n !== shape[axis]))
        padded.push({ axis, size: shape[axis]!, lengths });
    }
    if (tensors.length === 1) return ref;
    const fill = storedPadValue(ref.dtype, this.padValue(ref.name));
    const data = filledStorage(ref.dtype, shapeSize(shape), fill);
    const rowSize = shapeSize(shape.slice(1));
    let row = 0;
    for (const t of tensors) {
      copyBlock(t.data, t.shape, 0, data, shape, row * rowSize, t.shape);
      row += t.shape[0]!;
    }
    return new Tensor(ref.dtype, data, shape, ref.name);
  }

  private lengthsTensor(
    lists: readonly (readonly AnyTensor[])[],
    counts: readonly number[],
  ): AnyTensor {
    const rows = counts.reduce((a, b) => a + b, 0);
    const lengths = new BigInt64Array(rows);
    let row = 0;
    lists.forEach((tensors, i) => {
      lengths.fill(BigInt(tensors[0]!.shape[this.lengthsAxis]!), row, row + counts[i]!);
      row += counts[i]!;
    });
    return new Tensor('int64', lengths, [rows], this.options.lengthsInput);
  }

  /** Splits batched outputs by rows and cuts padded axes back to each item's true length. */
  private unpad(
    output: NDList,
    counts: readonly number[],
    padded: readonly PaddedAxis[],
  ): NDList[] {
    const columns = output.tensors.map((tensor) => {
      const cuts = this.cuts(tensor, padded);
      return splitRows(tensor, counts).map((piece, item) => {
        if (cuts.length === 0) return piece;
        const shape = [...piece.shape];
        for (const { axis, padding } of cuts) shape[axis] = padding.lengths[item]!;
        return shape.every((n, i) => n === piece.shape[i]) ? piece : cropTensor(piece, shape);
      });
    });
    return counts.map((_, item) => new NDList(columns.map((pieces) => pieces[item]!)));
  }

  /** Which axes of an output to cut, and the padded input axis each follows. */
  private cuts(
    tensor: AnyTensor,
    padded: readonly PaddedAxis[],
  ): { axis: number; padding: PaddedAxis }[] {
    const listed = tensor.name !== undefined ? this.options.outputAxes?.[tensor.name] : undefined;
    const cuts: { axis: number; padding: PaddedAxis }[] = [];
    for (let axis = 1; axis < tensor.rank; axis++) {
      const size = tensor.shape[axis];
      const sameAxis = padded.find((p) => p.axis === axis && p.size === size);
      const padding =
        listed === undefined
          ? sameAxis
          : listed.includes(axis)
            ? (sameAxis ?? padded.find((p) => p.size === size))
            : undefined;
      if (padding) cuts.push({ axis, padding });
    }
    return cuts;
  }
}

/** The padded batch shape: total rows, then the largest size of every other axis. */
function batchShape(tensors: readonly AnyTensor[]): Shape {
  const shape = [...tensors[0]!.shape];
  shape[0] = 0;
  for (const t of tensors) {
    shape[0] += t.shape[0]!;
    for (let axis = 1; axis < shape.length; axis++)
      shape[axis] = Math.max(shape[axis]!, t.shape[axis]!);
  }
  return shape;
}

function invalid(message: string): KilnError {
  return new KilnError(KilnErrorCode.InvalidConfig, message);
}
