import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { grpcStatusName, toGrpcError } from './grpc-status.js';

describe('toGrpcError', () => {
  it('maps Kiln errors to the status Triton gives the same class of error', () => {
    const cases: [KilnErrorCode, status][] = [
      [KilnErrorCode.InvalidInput, status.INVALID_ARGUMENT],
      [KilnErrorCode.MalformedTensor, status.INVALID_ARGUMENT],
      [KilnErrorCode.ModelNotFound, status.NOT_FOUND],
      [KilnErrorCode.ModelNotReady, status.UNAVAILABLE],
      [KilnErrorCode.QueueFull, status.UNAVAILABLE],
      [KilnErrorCode.Closed, status.UNAVAILABLE],
      [KilnErrorCode.Timeout, status.DEADLINE_EXCEEDED],
      [KilnErrorCode.Cancelled, status.CANCELLED],
      [KilnErrorCode.PayloadTooLarge, status.RESOURCE_EXHAUSTED],
      [KilnErrorCode.Unauthorized, status.UNAUTHENTICATED],
      [KilnErrorCode.EngineError, status.INTERNAL],
      [KilnErrorCode.WorkerCrashed, status.INTERNAL],
    ];
    for (const [code, expected] of cases)
      expect(toGrpcError(new KilnError(code, 'why')), code).toEqual({
        code: expected,
        details: 'why',
      });
  });

  it('hides the details of anything that is not a KilnError', () => {
    expect(toGrpcError(new Error('/secret/path.ts:12'))).toEqual({
      code: status.INTERNAL,
      details: 'internal server error',
    });
    expect(grpcStatusName(status.NOT_FOUND)).toBe('NOT_FOUND');
  });
});
