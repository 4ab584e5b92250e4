import { status as GrpcStatus } from '@grpc/grpc-js';
import { KilnErrorCode } from '@kiln/core';
import { toHttpError } from '../http/error-status.js';

export interface GrpcError {
  readonly code: GrpcStatus;
  readonly details: string;
}

/** Codes whose gRPC meaning is sharper than their HTTP status's. */
const BY_CODE: Partial<Record<KilnErrorCode, GrpcStatus>> = {
  [KilnErrorCode.Timeout]: GrpcStatus.DEADLINE_EXCEEDED,
  [KilnErrorCode.Cancelled]: GrpcStatus.CANCELLED,
  // Triton answers a full queue with UNAVAILABLE, which clients retry with back-off.
  [KilnErrorCode.QueueFull]: GrpcStatus.UNAVAILABLE,
  [KilnErrorCode.PayloadTooLarge]: GrpcStatus.RESOURCE_EXHAUSTED,
};

/** Triton's mapping of its error classes, keyed by the HTTP status the same error gets. */
const BY_HTTP_STATUS: Readonly<Record<number, GrpcStatus>> = {
  400: GrpcStatus.INVALID_ARGUMENT,
  401: GrpcStatus.UNAUTHENTICATED,
  403: GrpcStatus.PERMISSION_DENIED,
  404: GrpcStatus.NOT_FOUND,
  408: GrpcStatus.DEADLINE_EXCEEDED,
  413: GrpcStatus.RESOURCE_EXHAUSTED,
  415: GrpcStatus.UNIMPLEMENTED,
  429: GrpcStatus.UNAVAILABLE,
  503: GrpcStatus.UNAVAILABLE,
  504: GrpcStatus.DEADLINE_EXCEEDED,
};

/**
 * The gRPC status for anything thrown while serving a call; the message is the one HTTP
 * clients see (internal errors keep their details in the log).
 */
export function toGrpcError(error: unknown): GrpcError {
  const http = toHttpError(error, { overloadStatus: 503, retryAfterS: 0 });
  return {
    code: BY_CODE[http.code] ?? BY_HTTP_STATUS[http.status] ?? GrpcStatus.INTERNAL,
    details: http.message,
  };
}

/** `NOT_FOUND` for status 5: the label Prometheus and logs show. */
export function grpcStatusName(code: GrpcStatus): string {
  return GrpcStatus[code] ?? String(code);
}
