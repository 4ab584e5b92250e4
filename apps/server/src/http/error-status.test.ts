import { describe, expect, it } from 'vitest';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { toHttpError } from './error-status.js';

const options = { overloadStatus: 503 as const, retryAfterS: 2 };

describe('toHttpError', () => {
  it.each([
    [KilnErrorCode.InvalidInput, 400],
    [KilnErrorCode.ShapeMismatch, 400],
    [KilnErrorCode.ModelNotFound, 404],
    [KilnErrorCode.PayloadTooLarge, 413],
    [KilnErrorCode.UrlNotAllowed, 403],
    [KilnErrorCode.Unauthorized, 401],
    [KilnErrorCode.Timeout, 504],
    [KilnErrorCode.EngineError, 500],
  ])('maps %s to %i', (code, status) => {
    expect(toHttpError(new KilnError(code, 'x'), options).status).toBe(status);
  });

  it('answers overload with the configured status and Retry-After', () => {
    const full = new KilnError(KilnErrorCode.QueueFull, 'queue full');
    expect(toHttpError(full, options)).toMatchObject({
      status: 503,
      type: 'QueueFull',
      retryAfterS: 2,
    });
    expect(toHttpError(full, { overloadStatus: 429, retryAfterS: 5 })).toMatchObject({
      status: 429,
      retryAfterS: 5,
    });
  });

  it('hides everything about errors that are not KilnErrors', () => {
    const mapped = toHttpError(new TypeError('secret internals at /srv/app.js:12'), options);
    expect(mapped).toMatchObject({ status: 500, message: 'internal server error' });
  });
});
