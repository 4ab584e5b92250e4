import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as GrpcJs from '@grpc/grpc-js';
import type { GrpcObject, ServiceDefinition } from '@grpc/grpc-js';
import type * as ProtoLoader from '@grpc/proto-loader';

// Loaded on first use: a server without a gRPC listener never pays for them at start-up.
const require = createRequire(import.meta.url);

/** Kiln's copy of the Open Inference Protocol's gRPC contract (package `inference`). */
export const INFERENCE_PROTO_PATH = fileURLToPath(
  new URL('../../proto/grpc_predict_v2.proto', import.meta.url),
);

/**
 * How messages look in JavaScript: field names as in the .proto, 64-bit integers as decimal
 * strings (no precision lost), bytes as Buffers, empty fields present, oneofs named.
 */
export const PROTO_LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  arrays: true,
  oneofs: true,
} as const;

/** The loaded `inference` package: `GRPCInferenceService` and its messages. */
export function loadInferencePackage(): GrpcObject {
  const { loadPackageDefinition } = require('@grpc/grpc-js') as typeof GrpcJs;
  const { loadSync } = require('@grpc/proto-loader') as typeof ProtoLoader;
  return loadPackageDefinition(loadSync(INFERENCE_PROTO_PATH, PROTO_LOADER_OPTIONS))
    .inference as GrpcObject;
}

export function inferenceServiceDefinition(): ServiceDefinition {
  const service = loadInferencePackage().GRPCInferenceService as unknown as {
    service: ServiceDefinition;
  };
  return service.service;
}

/** Parses one method's request message from its bytes. */
export type RequestDecoder = (bytes: Buffer) => unknown;

/**
 * The service with each request handed to its handler as bytes, and each method's parser.
 * grpc-js answers a request its own parser refuses with INTERNAL, a server fault; parsed in
 * the handler, a malformed message is the client's error, INVALID_ARGUMENT. grpc-js joins each
 * request's frames into a new buffer, which the handler may keep. A handler that answers a
 * Buffer answers the response message's bytes, sent as they are.
 */
export function bytesInServiceDefinition(): {
  definition: ServiceDefinition;
  decoders: ReadonlyMap<string, RequestDecoder>;
} {
  const decoders = new Map<string, RequestDecoder>();
  const definition: Record<string, ServiceDefinition[string]> = {};
  for (const [method, attributes] of Object.entries(inferenceServiceDefinition())) {
    decoders.set(method, attributes.requestDeserialize as RequestDecoder);
    const serialize = attributes.responseSerialize;
    definition[method] = {
      ...attributes,
      requestDeserialize: (bytes: Buffer) => bytes,
      responseSerialize: (value: unknown) => (Buffer.isBuffer(value) ? value : serialize(value)),
    };
  }
  return { definition, decoders };
}
