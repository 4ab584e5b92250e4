import { KilnError, KilnErrorCode } from '@kiln/core';

/** The error for an aborted request: the signal's reason when it is a KilnError. */
export function cancelledError(signal: AbortSignal): KilnError {
  const reason: unknown = signal.reason;
  return reason instanceof KilnError
    ? reason
    : new KilnError(KilnErrorCode.Cancelled, 'the request was cancelled');
}
