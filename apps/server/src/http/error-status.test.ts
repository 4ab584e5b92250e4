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

  it("keeps a model's own error status within its error's class", () => {
    const own = (code: KilnErrorCode, httpStatus: unknown) =>
      toHttpError(new KilnError(code, 'x', { details: { httpStatus } }), options).status;
    expect(own(KilnErrorCode.InvalidInput, 429)).toBe(429);
    expect(own(KilnErrorCode.EngineError, 507)).toBe(507);
    // A client error stays 4xx and a server error 5xx; anything else keeps the code's status.
    expect(own(KilnErrorCode.InvalidInput, 503)).toBe(400);
    expect(own(KilnErrorCode.EngineError, 404)).toBe(500);
    expect(own(KilnErrorCode.EngineError, 600)).toBe(500);
    expect(own(KilnErrorCode.EngineError, 502.5)).toBe(500);
    expect(own(KilnErrorCode.EngineError, '503')).toBe(500);
  });

  it('hides everything about errors that are not KilnErrors', () => {
    const mapped = toHttpError(new TypeError('secret internals at /srv/app.js:12'), options);
    expect(mapped).toMatchObject({ status: 500, message: 'internal server error' });
  });
});
