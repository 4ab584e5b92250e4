/**
 * What the addon and its loader throw: an Error with one of Kiln's stable error codes (the
 * strings of @kiln/core's KilnErrorCode). Engines turn these into KilnErrors; this package
 * stays free of other Kiln packages so that it can be built and loaded on its own.
 */
export interface DlrNativeErrorLike extends Error {
  readonly code: string;
}

export class DlrNativeError extends Error implements DlrNativeErrorLike {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DlrNativeError';
    this.code = code;
  }
}

/** Errors from the addon (name KilnNativeError) or its loader carry a string `code`. */
export function isDlrNativeError(value: unknown): value is DlrNativeErrorLike {
  return value instanceof Error && typeof (value as { code?: unknown }).code === 'string';
}
