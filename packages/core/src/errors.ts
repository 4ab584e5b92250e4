/**
 * Stable error codes. The server maps them to HTTP statuses; clients may branch on them.
 * Add codes, never rename them.
 */
export const KilnErrorCode = {
  InvalidInput: 'INVALID_INPUT',
  MalformedTensor: 'MALFORMED_TENSOR',
  UnsupportedFormat: 'UNSUPPORTED_FORMAT',
  UnsupportedDType: 'UNSUPPORTED_DTYPE',
  ShapeMismatch: 'SHAPE_MISMATCH',
  ModelNotFound: 'MODEL_NOT_FOUND',
  ModelLoadFailed: 'MODEL_LOAD_FAILED',
  ModelNotReady: 'MODEL_NOT_READY',
  EngineUnavailable: 'ENGINE_UNAVAILABLE',
  EngineError: 'ENGINE_ERROR',
  QueueFull: 'QUEUE_FULL',
  Timeout: 'TIMEOUT',
  Cancelled: 'CANCELLED',
  WorkerCrashed: 'WORKER_CRASHED',
  PredictorBusy: 'PREDICTOR_BUSY',
  Closed: 'CLOSED',
  ArchiveUnsafe: 'ARCHIVE_UNSAFE',
  ArchiveTooLarge: 'ARCHIVE_TOO_LARGE',
  UrlNotAllowed: 'URL_NOT_ALLOWED',
  InvalidConfig: 'INVALID_CONFIG',
  PayloadTooLarge: 'PAYLOAD_TOO_LARGE',
  Unauthorized: 'UNAUTHORIZED',
  /** The request is not accepted from where it comes (foreign Host or Origin). */
  Forbidden: 'FORBIDDEN',
  /** The client sent its request too slowly. */
  RequestTimeout: 'REQUEST_TIMEOUT',
  Internal: 'INTERNAL',
} as const;

export type KilnErrorCode = (typeof KilnErrorCode)[keyof typeof KilnErrorCode];

export interface KilnErrorOptions {
  cause?: unknown;
  /** Extra machine-readable facts (e.g. every engine failure of a registry resolution). */
  details?: Record<string, unknown>;
}

/** The one error family of Kiln. `code` is stable; `message` is for people. */
export class KilnError extends Error {
  readonly code: KilnErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: KilnErrorCode, message: string, options: KilnErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'KilnError';
    this.code = code;
    this.details = options.details;
  }

  /** Plain object that survives structured clone (worker threads) and JSON. */
  toJSON(): SerializedKilnError {
    return { name: 'KilnError', code: this.code, message: this.message, details: this.details };
  }

  static fromJSON(value: SerializedKilnError): KilnError {
    return new KilnError(value.code, value.message, { details: value.details });
  }

  static is(value: unknown, code?: KilnErrorCode): value is KilnError {
    return value instanceof KilnError && (code === undefined || value.code === code);
  }

  /** Wraps anything thrown into a KilnError, keeping KilnErrors as they are. */
  static wrap(value: unknown, code: KilnErrorCode, prefix?: string): KilnError {
    if (value instanceof KilnError) return value;
    const message = value instanceof Error ? value.message : String(value);
    return new KilnError(code, prefix ? `${prefix}: ${message}` : message, { cause: value });
  }
}

export interface SerializedKilnError {
  name: 'KilnError';
  code: KilnErrorCode;
  message: string;
  details?: Record<string, unknown> | undefined;
}

export function isSerializedKilnError(value: unknown): value is SerializedKilnError {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { name?: unknown }).name === 'KilnError' &&
    typeof (value as { code?: unknown }).code === 'string'
  );
}
