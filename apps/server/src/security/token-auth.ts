import { timingSafeEqual, createHash } from 'node:crypto';
import type { Middleware } from 'koa';
import { KilnError, KilnErrorCode } from '@kiln/core';

/**
 * Whether an `Authorization` header carries `Bearer <token>`; compares in constant time.
 * Kept free of HTTP framework types so that every listener (HTTP, gRPC) can use it.
 */
export function bearerMatches(authorization: string | undefined, token: string): boolean {
  const given = /^Bearer\s+(.+)$/i.exec(authorization ?? '')?.[1]?.trim();
  return given !== undefined && timingSafeEqual(digest(given), digest(token));
}

/** Requires `Authorization: Bearer <token>`; `what` names what the token guards. */
export function requireToken(token: string, what = 'management API'): Middleware {
  return async (ctx, next) => {
    if (!bearerMatches(ctx.get('authorization') || undefined, token)) {
      ctx.set('WWW-Authenticate', 'Bearer');
      throw new KilnError(
        KilnErrorCode.Unauthorized,
        `${what} requires a valid bearer token (see the key file printed at start)`,
      );
    }
    await next();
  };
}

// Hashing first gives equal-length buffers, which timingSafeEqual needs.
function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}
