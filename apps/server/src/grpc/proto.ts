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
