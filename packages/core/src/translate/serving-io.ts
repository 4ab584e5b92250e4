import type { NDList } from '../tensor/ndlist.js';

/** One part of a multipart request: its form field name, bytes and content type. */
export interface ServingPart {
  readonly name: string;
  readonly data: Uint8Array;
  readonly contentType: string | undefined;
}

/** The body is an Open Inference Protocol (v2) infer request, answered as a v2 reply. */
export interface V2InferBody {
  /** Inference-Header-Content-Length: the JSON part's bytes when binary data follows. */
  readonly headerLength: string | undefined;
  /** The body is the protocol's gRPC ModelInferRequest, answered by a ModelInferResponse. */
  readonly grpc?: boolean;
  /** Named in the reply. */
  readonly model: string;
  readonly version: string;
}

/**
 * What a server hands a translator: the request body and its metadata, or tensors when the
 * protocol already carried tensors (the v2 protocol).
 */
export interface ServingInput {
  readonly body?: Uint8Array;
  readonly contentType?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly tensors?: NDList;
  /** The form field `body` came from, when it was a multipart request's only part. */
  readonly field?: string;
  /** The URL's query parameters, in order (Python mode hands each to the handler as a content). */
  readonly query?: readonly (readonly [string, string])[];
  /** Several tensor parts of a multipart request, decoded and joined where the model runs. */
  readonly parts?: readonly ServingPart[];
  /** Set when `body` is a v2 infer request: decoded, and answered, where the model runs. */
  readonly v2?: V2InferBody;
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

/**
 * What a translator gives back to a server: tensors (encoded per `Accept`), a JSON value, or
 * bytes already encoded for the protocol (a v2 reply with binary data), sent without a
 * Content-Type when `contentType` is undefined (a Python handler's unlabelled bytes).
 */
export type ServingOutput = (
  | { readonly type: 'tensors'; readonly tensors: NDList }
  | { readonly type: 'json'; readonly value: unknown }
  | {
      readonly type: 'bytes';
      readonly body: Uint8Array;
      readonly contentType: string | undefined;
    }
  /** The answer went out as ServingChunks through the request's `onChunk`: nothing follows. */
  | { readonly type: 'streamed' }
) & {
  /** Response headers the model asks for beside the content type (valid names and values). */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * The HTTP status (200 when left out): 204 when the model answered nothing (no body is
   * sent), or the code a Python handler's Output gave with its body (an error as DJL sends it).
   */
  readonly status?: number;
};

/**
 * A piece of an answer that streams (a Python handler's `Output.add_stream_content`), handed
 * to the request's `onChunk` as the model produces it; the request's result follows the last.
 */
export interface ServingChunk {
  /** On the first piece only: how the answer starts. */
  readonly head?: ServingChunkHead;
  readonly body: Uint8Array;
}

export interface ServingChunkHead {
  readonly status: number;
  /** Undefined: sent without a Content-Type. */
  readonly contentType: string | undefined;
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Takes a streamed answer's pieces in order; a promise it returns holds the next piece until it
 * settles (a slow client slows its own stream).
 */
export type ServingChunkSink = (chunk: ServingChunk) => void | Promise<void>;
