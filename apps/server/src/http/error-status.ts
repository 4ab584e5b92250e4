import { KilnError, KilnErrorCode } from '@kiln/core';

/** HTTP status for each stable error code. Overload (QUEUE_FULL) is configurable: 503 or 429. */
const STATUS: Record<KilnErrorCode, number> = {
  INVALID_INPUT: 400,
  MALFORMED_TENSOR: 400,
  UNSUPPORTED_FORMAT: 415,
  UNSUPPORTED_DTYPE: 400,
  SHAPE_MISMATCH: 400,
  MODEL_NOT_FOUND: 404,
  MODEL_LOAD_FAILED: 500,
  MODEL_NOT_READY: 503,
  ENGINE_UNAVAILABLE: 503,
  ENGINE_ERROR: 500,
  QUEUE_FULL: 503,
  TIMEOUT: 504,
  CANCELLED: 503,
  WORKER_CRASHED: 500,
  PREDICTOR_BUSY: 503,
  CLOSED: 503,
  ARCHIVE_UNSAFE: 400,
  ARCHIVE_TOO_LARGE: 413,
  URL_NOT_ALLOWED: 403,
  INVALID_CONFIG: 400,
  PAYLOAD_TOO_LARGE: 413,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  REQUEST_TIMEOUT: 408,
  INTERNAL: 500,
};

export interface HttpError {
  readonly status: number;
  /** DJL's error type name, e.g. `ModelNotFoundException`-like `ModelNotFound`. */
  readonly type: string;
  readonly message: string;
  readonly code: KilnErrorCode;
  /** Seconds to advertise in Retry-After, for overload answers. */
  readonly retryAfterS: number | undefined;
}

export interface ErrorMappingOptions {
  overloadStatus: 503 | 429;
  retryAfterS: number;
}

/**
 * Turns anything thrown while serving into a status and a message safe to show: KilnErrors
 * keep their message; anything else is an internal error whose details stay in the log.
 */
export function toHttpError(error: unknown, options: ErrorMappingOptions): HttpError {
  if (!(error instanceof KilnError)) {
    return {
      status: 500,
      type: 'InternalServerError',
      message: 'internal server error',
      code: KilnErrorCode.Internal,
      retryAfterS: undefined,
    };
  }
  const overloaded = error.code === KilnErrorCode.QueueFull;
  const status = overloaded ? options.overloadStatus : (ownStatus(error) ?? STATUS[error.code]);
  const unavailable =
    overloaded || error.code === KilnErrorCode.ModelNotReady || error.code === KilnErrorCode.Closed;
  return {
    status,
    type: typeName(error.code),
    message: error.message,
    code: error.code,
    retryAfterS: unavailable ? options.retryAfterS : undefined,
  };
}

/**
 * The status a model's own code asked for (a Python handler's `Output.set_code(429)`, as DJL
 * Serving answers it), when it is an error status: 4xx for a client error, 5xx for a server one.
 */
function ownStatus(error: KilnError): number | undefined {
  const status = (error.details as { httpStatus?: unknown } | undefined)?.httpStatus;
  if (typeof status !== 'number' || !Number.isInteger(status)) return undefined;
  const clientError = STATUS[error.code] < 500;
  return (clientError ? status >= 400 && status < 500 : status >= 500 && status < 600)
    ? status
    : undefined;
}

/** `QUEUE_FULL` → `QueueFull`. */
function typeName(code: string): string {
  return code
    .toLowerCase()
    .split('_')
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');
}
