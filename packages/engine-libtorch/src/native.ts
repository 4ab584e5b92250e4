import { KilnError, KilnErrorCode } from '@kiln/core';
import { type LibTorchBinding, isNativeError, loadLibTorchBinding } from '@kiln/libtorch-native';

const CODES = new Set<string>(Object.values(KilnErrorCode));

/**
 * The LibTorch addon, loaded on first use. Throws KilnError(ENGINE_UNAVAILABLE) whose message
 * lists every place looked at and how to fix it.
 */
export function libtorch(): LibTorchBinding {
  try {
    return loadLibTorchBinding();
  } catch (error) {
    throw KilnError.wrap(error, KilnErrorCode.EngineUnavailable);
  }
}

/** The addon's coded errors as KilnErrors with the same code; anything else as `fallback`. */
export function toKilnError(
  error: unknown,
  fallback: KilnErrorCode = KilnErrorCode.EngineError,
): KilnError {
  if (error instanceof KilnError) return error;
  if (isNativeError(error) && CODES.has(error.code)) {
    return new KilnError(error.code as KilnErrorCode, error.message, { cause: error });
  }
  return KilnError.wrap(error, fallback);
}

/** Runs `fn`, turning whatever it throws or rejects with into a KilnError. */
export async function native<T>(fn: () => T | Promise<T>, fallback?: KilnErrorCode): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw toKilnError(error, fallback);
  }
}
