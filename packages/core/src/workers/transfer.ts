import { KilnError, KilnErrorCode } from '../errors.js';
import {
  type DType,
  type DTypeStorage,
  type TensorData,
  type TypedArray,
  isDType,
} from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import { type AnyTensor, Tensor } from '../tensor/tensor.js';
import type {
  ServingInput,
  ServingOutput,
  ServingPart,
  V2InferBody,
} from '../translate/serving-io.js';

/**
 * Tensors, NDLists and serving inputs/outputs as plain values for `postMessage`. Class
 * instances lose their prototype in a structured clone, so they travel as these shapes and
 * are rebuilt (and validated) on the other side.
 */
export interface TensorMessage {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly name: string | undefined;
  readonly data: TensorData;
}

export interface NDListMessage {
  readonly tensors: readonly TensorMessage[];
}

export interface ServingInputMessage {
  readonly body: Uint8Array | undefined;
  readonly contentType: string | undefined;
  readonly headers: Readonly<Record<string, string>> | undefined;
  readonly tensors: NDListMessage | undefined;
  readonly parts: readonly ServingPart[] | undefined;
  readonly v2: V2InferBody | undefined;
  readonly rawTensors: boolean | undefined;
  readonly maxDecodedBytes: number | undefined;
}

export type ServingOutputMessage = (
  | { readonly type: 'tensors'; readonly tensors: NDListMessage }
  | { readonly type: 'json'; readonly value: unknown }
  | {
      readonly type: 'bytes';
      readonly body: Uint8Array;
      readonly contentType: string | undefined;
    }
  | { readonly type: 'streamed' }
) & {
  readonly headers: Readonly<Record<string, string>> | undefined;
  readonly status?: number;
};

/**
 * How a message treats the memory it carries.
 * - `move`: a view spanning its whole ArrayBuffer is transferred (the sender's view becomes
 *   empty); a view over part of a buffer is copied, because moving it would take the rest of
 *   the buffer away from whoever else holds it (Node's Buffer pool, sibling batch outputs).
 * - `copy`: every view is copied once; the sender's memory is never touched.
 * - `move-owned`: views of owned memory (`addOwned`: a request body, tensors decoded over it)
 *   move with their whole buffer; other views are copied.
 */
export type TransferMode = 'move' | 'copy' | 'move-owned';

/**
 * Collects the buffers a message hands to `postMessage` as its transfer list. Copies it makes
 * are fresh buffers, so they are transferred too: every view costs at most one copy, never
 * the copy of a whole underlying buffer that a structured clone of a partial view would make.
 */
export class TransferList {
  private readonly buffers = new Set<ArrayBuffer>();

  constructor(readonly mode: TransferMode) {}

  /** The list to pass as `postMessage(value, list)`. */
  get transfer(): ArrayBuffer[] {
    return [...this.buffers];
  }

  /** The view to put in the message in place of `view`. */
  add<T extends TypedArray>(view: T): T {
    const buffer = view.buffer;
    if (!(buffer instanceof ArrayBuffer)) return view; // shared memory is shared, not moved
    if (buffer.byteLength === 0) return view; // see the note above copy()
    const whole = view.byteOffset === 0 && view.byteLength === buffer.byteLength;
    if (this.mode === 'move' && whole) {
      this.buffers.add(buffer);
      return view;
    }
    return this.copy(view);
  }

  // Empty buffers are never listed: Node 20 silently drops a message whose transfer list holds
  // an already-detached buffer (one a previous call moved away), so the run would wait forever.
  // Unlisted, a detached buffer makes postMessage throw DataCloneError, which reaches the caller;
  // an empty buffer that is not detached costs nothing to clone.
  private copy<T extends TypedArray>(view: T): T {
    const copy = typedArraySlice.call(view) as T;
    this.buffers.add(copy.buffer as ArrayBuffer);
    return copy;
  }

  /**
   * Like `add`, for a view whose whole buffer its holder owns (a request body and the tensors
   * decoded over it): in `move` mode the buffer is transferred even when the view spans only
   * part of it, and the view keeps its offset on the other side.
   */
  addOwned<T extends TypedArray>(view: T): T {
    const buffer = view.buffer;
    if (!(buffer instanceof ArrayBuffer) || buffer.byteLength === 0) return view;
    if (this.mode === 'copy') return this.copy(view);
    this.buffers.add(buffer);
    return view;
  }
}

// %TypedArray%.prototype.slice copies; Buffer overrides `slice` with a view that shares memory.
const typedArraySlice = (
  Object.getPrototypeOf(Uint8Array.prototype) as { slice(this: TypedArray): TypedArray }
).slice;

export function tensorToMessage(
  tensor: AnyTensor,
  transfer: TransferList,
  owned = false,
): TensorMessage {
  const view = tensor.data as TypedArray;
  const data = Array.isArray(tensor.data)
    ? tensor.data
    : owned
      ? transfer.addOwned(view)
      : transfer.add(view);
  return { dtype: tensor.dtype, shape: [...tensor.shape], name: tensor.name, data };
}

export function tensorFromMessage(message: TensorMessage): AnyTensor {
  if (!isDType(message.dtype)) {
    throw new KilnError(
      KilnErrorCode.MalformedTensor,
      `message holds an unknown dtype ${JSON.stringify(message.dtype)}`,
    );
  }
  return new Tensor(
    message.dtype,
    message.data as DTypeStorage[DType],
    message.shape,
    message.name,
  );
}

export function ndListToMessage(
  list: NDList,
  transfer: TransferList,
  owned = false,
): NDListMessage {
  return { tensors: list.tensors.map((t) => tensorToMessage(t, transfer, owned)) };
}

export function ndListFromMessage(message: NDListMessage): NDList {
  return new NDList(message.tensors.map(tensorFromMessage));
}

export function servingInputToMessage(
  input: ServingInput,
  transfer: TransferList,
): ServingInputMessage {
  const owned = input.owned === true;
  const body = input.body;
  return {
    body: body === undefined ? undefined : owned ? transfer.addOwned(body) : transfer.add(body),
    contentType: input.contentType,
    headers: input.headers,
    tensors:
      input.tensors === undefined ? undefined : ndListToMessage(input.tensors, transfer, owned),
    parts: input.parts?.map((part) => ({
      ...part,
      data: owned ? transfer.addOwned(part.data) : transfer.add(part.data),
    })),
    v2: input.v2,
    rawTensors: input.rawTensors,
    maxDecodedBytes: input.maxDecodedBytes,
  };
}

export function servingInputFromMessage(message: ServingInputMessage): ServingInput {
  const input: { -readonly [K in keyof ServingInput]: ServingInput[K] } = {};
  if (message.body !== undefined) input.body = message.body;
  if (message.contentType !== undefined) input.contentType = message.contentType;
  if (message.headers !== undefined) input.headers = message.headers;
  if (message.tensors !== undefined) input.tensors = ndListFromMessage(message.tensors);
  if (message.parts !== undefined) input.parts = message.parts;
  if (message.v2 !== undefined) input.v2 = message.v2;
  if (message.rawTensors !== undefined) input.rawTensors = message.rawTensors;
  if (message.maxDecodedBytes !== undefined) input.maxDecodedBytes = message.maxDecodedBytes;
  return input;
}

export function servingOutputToMessage(
  output: ServingOutput,
  transfer: TransferList,
): ServingOutputMessage {
  const common = { headers: output.headers, ...(output.status ? { status: output.status } : {}) };
  switch (output.type) {
    case 'tensors':
      return { type: 'tensors', tensors: ndListToMessage(output.tensors, transfer), ...common };
    case 'bytes':
      return {
        type: 'bytes',
        body: transfer.add(output.body),
        contentType: output.contentType,
        ...common,
      };
    case 'streamed':
      return { type: 'streamed', ...common };
    default:
      return { type: 'json', value: output.value, ...common };
  }
}

export function servingOutputFromMessage(message: ServingOutputMessage): ServingOutput {
  const common = {
    ...(message.headers === undefined ? {} : { headers: message.headers }),
    ...(message.status ? { status: message.status } : {}),
  };
  switch (message.type) {
    case 'tensors':
      return { type: 'tensors', tensors: ndListFromMessage(message.tensors), ...common };
    case 'bytes':
      return { type: 'bytes', body: message.body, contentType: message.contentType, ...common };
    case 'streamed':
      return { type: 'streamed', ...common };
    default:
      return { type: 'json', value: message.value, ...common };
  }
}
