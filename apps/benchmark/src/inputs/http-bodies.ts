import {
  type NDList,
  dtypeNames,
  encodeBinaryTensor,
  encodeNpy,
  encodeNpz,
  encodeV2Tensor,
} from '@kiln/core';

/** How requests reach the server. */
export const PROTOCOLS = ['predictions', 'v2', 'v2-binary'] as const;
export type Protocol = (typeof PROTOCOLS)[number];

/** One request, encoded once and sent as many times as the benchmark needs. */
export interface PreparedRequest {
  readonly path: string;
  readonly body: Buffer;
  readonly headers: Readonly<Record<string, string>>;
}

export interface RequestTarget {
  readonly protocol: Protocol;
  readonly model: string;
  readonly version?: string | undefined;
}

/**
 * Encodes tensors for a protocol: DJL's `/predictions` gets npy (one tensor) or npz; the
 * v2 protocol gets JSON, or the binary-data extension (JSON header, then raw tensors) with
 * binary outputs asked for, so neither side spends time on JSON numbers.
 */
export function tensorRequest(target: RequestTarget, tensors: NDList): PreparedRequest {
  switch (target.protocol) {
    case 'predictions': {
      const single = tensors.length === 1;
      const body = single ? encodeNpy(tensors.get(0)) : encodeNpz(tensors);
      return request(predictionsPath(target), body, single ? 'tensor/npy' : 'tensor/npz');
    }
    case 'v2': {
      const json = {
        inputs: tensors.tensors.map((t, i) => encodeV2Tensor(t, t.name ?? `input${i}`)),
      };
      return request(v2InferPath(target), Buffer.from(JSON.stringify(json)), 'application/json');
    }
    case 'v2-binary': {
      const data = tensors.tensors.map((t) => encodeBinaryTensor(t));
      const header = Buffer.from(
        JSON.stringify({
          inputs: tensors.tensors.map((t, i) => ({
            name: t.name ?? `input${i}`,
            shape: [...t.shape],
            datatype: dtypeNames(t.dtype).v2,
            parameters: { binary_data_size: data[i]!.byteLength },
          })),
          parameters: { binary_data_output: true },
        }),
      );
      return {
        path: v2InferPath(target),
        body: Buffer.concat([header, ...data]),
        headers: {
          'content-type': 'application/octet-stream',
          'inference-header-content-length': String(header.byteLength),
        },
      };
    }
  }
}

/** A file's bytes sent as they are to `/predictions` (an image, a JSON document…). */
export function fileRequest(
  target: RequestTarget,
  body: Uint8Array,
  contentType: string | undefined,
): PreparedRequest {
  return request(
    predictionsPath(target),
    Buffer.from(body.buffer, body.byteOffset, body.byteLength),
    contentType,
  );
}

const MEDIA_TYPES: Readonly<Record<string, string>> = {
  '.json': 'application/json',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.png': 'image/png',
  '.npy': 'tensor/npy',
  '.npz': 'tensor/npz',
  '.safetensors': 'tensor/safetensors',
  '.ndlist': 'tensor/ndlist',
};

/** The media type a file's extension implies, if any. */
export function mediaTypeOf(file: string): string | undefined {
  const dot = file.lastIndexOf('.');
  return dot < 0 ? undefined : MEDIA_TYPES[file.slice(dot).toLowerCase()];
}

function request(path: string, body: Uint8Array, contentType: string | undefined): PreparedRequest {
  return {
    path,
    body: Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength),
    headers: contentType ? { 'content-type': contentType } : {},
  };
}

function predictionsPath(target: RequestTarget): string {
  const model = encodeURIComponent(target.model);
  return target.version
    ? `/predictions/${model}/${encodeURIComponent(target.version)}`
    : `/predictions/${model}`;
}

function v2InferPath(target: RequestTarget): string {
  const model = encodeURIComponent(target.model);
  return target.version
    ? `/v2/models/${model}/versions/${encodeURIComponent(target.version)}/infer`
    : `/v2/models/${model}/infer`;
}
