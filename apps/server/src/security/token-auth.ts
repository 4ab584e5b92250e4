import { timingSafeEqual, createHash } from 'node:crypto';
import type { Middleware } from 'koa';
import { KilnError, KilnErrorCode } from '@kiln/core';

/** Requires `Authorization: Bearer <token>`; compares in constant time. */
export function requireToken(token: string): Middleware {
  const expected = digest(token);
  return async (ctx, next) => {
    const header = ctx.get('authorization');
    const given = /^Bearer\s+(.+)$/i.exec(header)?.[1]?.trim();
    if (!given || !timingSafeEqual(digest(given), expected)) {
      ctx.set('WWW-Authenticate', 'Bearer');
      throw new KilnError(
        KilnErrorCode.Unauthorized,
        'management API requires a valid bearer token',
      );
    }
    await next();
  };
}

// Hashing first gives equal-length buffers, which timingSafeEqual needs.
function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}
