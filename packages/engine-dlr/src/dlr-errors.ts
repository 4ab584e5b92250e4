import { KilnError, KilnErrorCode } from '@kiln/core';
import { isDlrNativeError } from '@kiln/dlr-native';

const CODES = new Set<string>(Object.values(KilnErrorCode));

/**
 * A KilnError for anything the addon or its loader threw: their stable code and DLR's own
 * message are kept; anything else becomes `fallback`.
 */
export function toKilnError(error: unknown, fallback: KilnErrorCode, prefix?: string): KilnError {
  if (error instanceof KilnError) return error;
  if (isDlrNativeError(error) && CODES.has(error.code)) {
    const message = prefix ? `${prefix}: ${error.message}` : error.message;
    return new KilnError(error.code as KilnErrorCode, message, { cause: error });
  }
  return KilnError.wrap(error, fallback, prefix);
}
