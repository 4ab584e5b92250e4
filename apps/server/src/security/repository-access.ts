import type { Middleware } from 'koa';
import { isLoopbackHost, parseAddress } from '../config/server-config.js';
import type { ManagementKey } from './management-key.js';
import { requireToken } from './token-auth.js';

/**
 * Who may load and unload models through the v2 repository extension, which lives on the
 * inference listener: holders of the management key, as on the management API (the listener's
 * Host and Origin checks apply as well). With token authorization disabled, nobody on a
 * listener reachable beyond this machine: undefined, and the extension is not served there.
 */
export function repositoryAccess(
  inferenceAddress: string,
  managementKey: ManagementKey | undefined,
): Middleware | undefined {
  // The management key, not a key of its own: loading models is management.
  if (managementKey) return requireToken(managementKey.token, 'the v2 model repository extension');
  if (isLoopbackHost(parseAddress(inferenceAddress).host)) return (_ctx, next) => next();
  return undefined;
}
