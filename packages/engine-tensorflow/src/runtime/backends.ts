import { KilnError, KilnErrorCode } from '@kiln/core';

/**
 * TensorFlow.js backends, best first: native TensorFlow with CUDA, native TensorFlow on CPU,
 * WebAssembly (SIMD), then plain JavaScript.
 */
export const TF_BACKENDS = ['tfjs-node-gpu', 'tfjs-node', 'wasm', 'cpu'] as const;
export type TfBackendName = (typeof TF_BACKENDS)[number];

/** Forces a backend (or a comma-separated list, best first) without code. */
export const TF_BACKEND_ENV = 'KILN_TENSORFLOW_BACKEND';

export interface TfBackendInfo {
  /** The npm package that brings the backend. */
  readonly packageName: string;
  /** What users install to get it. */
  readonly install: string;
  /** Native TensorFlow (libtensorflow through an N-API addon). */
  readonly native: boolean;
}

export const BACKEND_INFO: Readonly<Record<TfBackendName, TfBackendInfo>> = {
  'tfjs-node-gpu': {
    packageName: '@tensorflow/tfjs-node-gpu',
    install: 'npm install @tensorflow/tfjs-node-gpu, on Linux with CUDA',
    native: true,
  },
  'tfjs-node': {
    packageName: '@tensorflow/tfjs-node',
    install: 'npm install @tensorflow/tfjs-node',
    native: true,
  },
  wasm: {
    packageName: '@tensorflow/tfjs-backend-wasm',
    install: 'npm install @tensorflow/tfjs @tensorflow/tfjs-backend-wasm',
    native: false,
  },
  cpu: { packageName: '@tensorflow/tfjs', install: 'npm install @tensorflow/tfjs', native: false },
};

export function isTfBackendName(value: string): value is TfBackendName {
  return (TF_BACKENDS as readonly string[]).includes(value);
}

/**
 * The backends to try, best first: the option when given, else KILN_TENSORFLOW_BACKEND,
 * else all of them. Unknown names are INVALID_CONFIG.
 */
export function backendPreference(
  option: TfBackendName | readonly TfBackendName[] | undefined,
  env: Readonly<Record<string, string | undefined>>,
): TfBackendName[] {
  const source: readonly string[] | string | undefined =
    option ??
    env[TF_BACKEND_ENV]?.split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const names = source === undefined ? [] : typeof source === 'string' ? [source] : source;
  if (names.length === 0) return [...TF_BACKENDS];
  const unknown = names.find((name) => !isTfBackendName(name));
  if (unknown !== undefined) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `unknown TensorFlow backend ${JSON.stringify(unknown)} (use ${TF_BACKENDS.join(', ')})`,
    );
  }
  return [...new Set(names as TfBackendName[])];
}
