import { fileURLToPath } from 'node:url';
import { type GrpcObject, type ServiceDefinition, loadPackageDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';

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
  return loadPackageDefinition(loadSync(INFERENCE_PROTO_PATH, PROTO_LOADER_OPTIONS))
    .inference as GrpcObject;
}

export function inferenceServiceDefinition(): ServiceDefinition {
  const service = loadInferencePackage().GRPCInferenceService as unknown as {
    service: ServiceDefinition;
  };
  return service.service;
}
