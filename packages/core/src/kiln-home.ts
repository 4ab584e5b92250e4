import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Kiln's per-user folder (demo model, generated keys, optimized-model caches): `$KILN_HOME`
 * or `~/.cache/kiln`.
 */
export function kilnHome(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return env.KILN_HOME || join(homedir(), '.cache', 'kiln');
}
