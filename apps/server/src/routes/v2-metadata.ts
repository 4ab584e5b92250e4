import { type TensorDescriptor, dtypeNames } from '@kiln/core';
import { pingStatus } from '../models/model-entry.js';
import type { ServerContext } from './server-context.js';

/** Triton-style platform names per engine. */
const PLATFORMS: Record<string, string> = {
  OnnxRuntime: 'onnxruntime_onnx',
  PyTorch: 'pytorch_libtorch',
  TensorFlow: 'tensorflow_tfjs',
  DLR: 'tvm_dlr',
};

/** Protocol extensions every v2 listener (HTTP and gRPC) implements. */
export const V2_EXTENSIONS = ['binary_tensor_data'] as const;

/** The repository extension: HTTP only, where the management key can guard it. */
export const MODEL_REPOSITORY_EXTENSION = 'model_repository';

/** What the model does not declare (TorchScript inputs) is left out. */
export interface V2TensorMetadata {
  name: string;
  datatype?: string;
  shape?: number[];
}

export interface V2ModelMetadata {
  name: string;
  versions: string[];
  platform: string;
  inputs: V2TensorMetadata[];
  outputs: V2TensorMetadata[];
  state?: string;
}

/**
 * Ready (what HTTP and gRPC readiness answer): the models named at start registered, every
 * model serving, and no shutdown under way — so that Kubernetes sends no traffic to a replica
 * whose models are still on their way.
 */
export function serverReady(server: ServerContext): boolean {
  return (
    server.accepting &&
    server.startupRegistered &&
    server.models.list().every((e) => pingStatus(e) === 'Healthy')
  );
}

export function modelReady(server: ServerContext, name: string, version?: string): boolean {
  return pingStatus(server.models.get(name, version)) === 'Healthy';
}

/** A model's v2 metadata; -1 marks dynamic dimensions. */
export function modelMetadata(
  server: ServerContext,
  name: string,
  version?: string,
): V2ModelMetadata {
  const entry = server.models.get(name, version);
  const signature = entry.signature;
  return {
    name: entry.name,
    versions: server.models
      .versions(entry.name)
      .map((e) => e.version)
      .filter(Boolean),
    platform:
      PLATFORMS[signature?.engine ?? entry.engineName ?? ''] ?? signature?.engine ?? 'unknown',
    inputs: (signature?.inputs ?? []).map(describeTensor),
    outputs: (signature?.outputs ?? []).map(describeTensor),
    ...(entry.state !== 'READY' ? { state: entry.state } : {}),
  };
}

function describeTensor(d: TensorDescriptor): V2TensorMetadata {
  return {
    name: d.name,
    ...(d.dtype === undefined ? {} : { datatype: dtypeNames(d.dtype).v2 }),
    ...(d.shape === undefined ? {} : { shape: [...d.shape] }),
  };
}
