import { KilnError, KilnErrorCode } from '../errors.js';
import {
  type DType,
  type DTypeStorage,
  type TensorData,
  type TypedArray,
  isDType,
  typedArrayKind,
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
  readonly body?: Uint8Array;
  readonly contentType?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly tensors?: NDListMessage;
  readonly parts?: readonly ServingPart[];
  readonly v2?: V2InferBody;
  readonly rawTensors?: boolean;
  readonly maxDecodedBytes?: number;
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
  readonly headers?: Readonly<Record<string, string>>;
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
  /** One buffer the copies of a message share (see `reserveBytes`), filled from the front. */
  private arena: ArrayBuffer | undefined;
  private arenaUsed = 0;

  /**
   * `reserveBytes`: about how many bytes this message will copy (see `bytesToCopy`). Copies
   * then share one buffer of that size instead of one buffer each: a batch of small requests
   * crosses with one transferred buffer, not one per request, which is what a message of many
   * small views costs most. Copies that do not fit get buffers of their own.
   */
  constructor(
    readonly mode: TransferMode,
    options: { readonly reserveBytes?: number } = {},
  ) {
    const bytes = options.reserveBytes ?? 0;
    if (bytes > 0) {
      this.arena = new ArrayBuffer(bytes);
      this.buffers.add(this.arena);
    }
  }

  /** The list to pass as `postMessage(value, list)`. */
  get transfer(): ArrayBuffer[] {
    return [...this.buffers];
  }

  /** The view to put in the message in place of `view`. */
  add<T extends TypedArray>(view: T): T {
    return this.carry(view, false);
  }

  /**
   * Like `add`, for a view whose whole buffer its holder owns (a request body and the tensors
   * decoded over it): in `move` mode the buffer is transferred even when the view spans only
   * part of it, and the view keeps its offset on the other side.
   */
  addOwned<T extends TypedArray>(view: T): T {
    return this.carry(view, true);
  }

  private carry<T extends TypedArray>(view: T, owned: boolean): T {
    const how = disposition(this.mode, view, owned);
    if (how === 'copy') return this.copy(view);
    if (how === 'move') this.buffers.add(view.buffer as ArrayBuffer);
    return view;
  }

  // Empty buffers are never listed: Node 20 silently drops a message whose transfer list holds
  // an already-detached buffer (one a previous call moved away), so the run would wait forever.
  // Unlisted, a detached buffer makes postMessage throw DataCloneError, which reaches the caller;
  // an empty buffer that is not detached costs nothing to clone.
  private copy<T extends TypedArray>(view: T): T {
    const arena = this.arena;
    if (arena) {
      const offset = alignedOffset(this.arenaUsed);
      if (offset + view.byteLength <= arena.byteLength) {
        new Uint8Array(arena, offset, view.byteLength).set(
          new Uint8Array(view.buffer, view.byteOffset, view.byteLength),
        );
        this.arenaUsed = offset + view.byteLength;
        return viewOfSameKind(view, arena, offset);
      }
    }
    const copy = typedArraySlice.call(view) as T;
    this.buffers.add(copy.buffer as ArrayBuffer);
    return copy;
  }

  /**
   * The bytes `add`/`addOwned` would copy for these views in this mode, each aligned as the
   * arena aligns it: the `reserveBytes` that makes all of them share one buffer.
   */
  static bytesToCopy(
    mode: TransferMode,
    views: Iterable<{ readonly view: TypedArray; readonly owned: boolean }>,
  ): number {
    let bytes = 0;
    for (const { view, owned } of views)
      if (disposition(mode, view, owned) === 'copy') bytes = alignedOffset(bytes) + view.byteLength;
    return bytes;
  }
}

/**
 * What a message in `mode` does with `view`: `keep` it as it is (shared memory is shared, an
 * empty buffer costs nothing: see the note above copy()), `move` its whole buffer, or `copy` it.
 * Owned memory moves unless the mode copies everything; other memory moves only in `move` mode
 * and only as a whole buffer.
 */
function disposition(
  mode: TransferMode,
  view: TypedArray,
  owned: boolean,
): 'keep' | 'move' | 'copy' {
  const buffer = view.buffer;
  if (!(buffer instanceof ArrayBuffer) || buffer.byteLength === 0) return 'keep';
  if (mode === 'copy') return 'copy';
  if (owned) return 'move';
  const whole = view.byteOffset === 0 && view.byteLength === buffer.byteLength;
  return mode === 'move' && whole ? 'move' : 'copy';
}

/** Every typed array's elements are at most 8 bytes: an offset they can all start at. */
function alignedOffset(offset: number): number {
  return (offset + 7) & ~7;
}

/** A view of `view`'s kind over `buffer` (a Buffer becomes a Uint8Array, as a clone makes it). */
function viewOfSameKind<T extends TypedArray>(view: T, buffer: ArrayBuffer, offset: number): T {
  const kind = typedArrayKind(view);
  return new kind(buffer, offset, view.length) as T;
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

/**
 * Only the fields a request has: a structured clone writes every property, undefined ones
 * included, and a batch carries many requests.
 */
export function servingInputToMessage(
  input: ServingInput,
  transfer: TransferList,
): ServingInputMessage {
  const owned = input.owned === true;
  const message: { -readonly [K in keyof ServingInputMessage]: ServingInputMessage[K] } = {};
  const body = input.body;
  if (body !== undefined) message.body = owned ? transfer.addOwned(body) : transfer.add(body);
  if (input.contentType !== undefined) message.contentType = input.contentType;
  if (input.headers !== undefined) message.headers = input.headers;
  if (input.tensors !== undefined)
    message.tensors = ndListToMessage(input.tensors, transfer, owned);
  if (input.parts !== undefined)
    message.parts = input.parts.map((part) => ({
      ...part,
      data: owned ? transfer.addOwned(part.data) : transfer.add(part.data),
    }));
  if (input.v2 !== undefined) message.v2 = input.v2;
  if (input.rawTensors !== undefined) message.rawTensors = input.rawTensors;
  if (input.maxDecodedBytes !== undefined) message.maxDecodedBytes = input.maxDecodedBytes;
  return message;
}

/** The memory a request carries, for `TransferList.bytesToCopy`. */
export function* servingInputViews(
  input: ServingInput,
): Generator<{ view: TypedArray; owned: boolean }> {
  const owned = input.owned === true;
  if (input.body !== undefined) yield { view: input.body, owned };
  for (const tensor of input.tensors?.tensors ?? [])
    if (!Array.isArray(tensor.data)) yield { view: tensor.data as TypedArray, owned };
  for (const part of input.parts ?? []) yield { view: part.data, owned };
}

/** The memory an answer carries, for `TransferList.bytesToCopy`. */
export function* servingOutputViews(
  output: ServingOutput,
): Generator<{ view: TypedArray; owned: boolean }> {
  if (output.type === 'bytes') yield { view: output.body, owned: false };
  if (output.type === 'tensors')
    for (const tensor of output.tensors.tensors)
      if (!Array.isArray(tensor.data)) yield { view: tensor.data as TypedArray, owned: false };
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
  // Moved here or cloned for this thread: its buffers are this request's alone.
  input.owned = true;
  return input;
}

export function servingOutputToMessage(
  output: ServingOutput,
  transfer: TransferList,
): ServingOutputMessage {
  // No undefined fields: a batch's answers cross in one message, each field cloned.
  const common = {
    ...(output.headers === undefined ? {} : { headers: output.headers }),
    ...(output.status ? { status: output.status } : {}),
  };
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
