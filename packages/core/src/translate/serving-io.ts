import type { NDList } from '../tensor/ndlist.js';

/**
 * What a server hands a translator: the request body and its metadata, or tensors when the
 * protocol already carried tensors (the v2 protocol).
 */
export interface ServingInput {
  readonly body?: Uint8Array;
  readonly contentType?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly tensors?: NDList;
  /**
   * Tensors in, tensors out, past the model's own translator (the v2 protocol): `tensors`
   * are checked against the model's inputs and its outputs come back as they are.
   */
  readonly rawTensors?: boolean;
  /**
   * Most bytes a body may decode to (inflated npz entries, tensors, image pixels), checked
   * before allocating: a server sets it from its request size limit.
   */
  readonly maxDecodedBytes?: number;
  /**
   * Every buffer this input's body and tensors reach belongs to this request alone (a server's
   * request body): a worker pool moves those buffers to its worker thread instead of copying
   * them, and the caller's views become empty.
   */
  readonly owned?: boolean;
}

/** What a translator gives back to a server: tensors (encoded per `Accept`) or a JSON value. */
export type ServingOutput =
  | { readonly type: 'tensors'; readonly tensors: NDList }
  | { readonly type: 'json'; readonly value: unknown };
