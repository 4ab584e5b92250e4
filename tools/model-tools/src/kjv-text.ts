import { spawnSync } from 'node:child_process';
import { KJV_PROGRAM, kjvTextUnavailable } from './tiny-gpt.js';

/**
 * The King James Bible's verses from Debian's bible-kjv (public domain), one a line, their
 * references (`Ge1:1 `) stripped; `range` as `bible -f` takes it (default: all of it).
 * Throws when the package is missing (kjvTextUnavailable says so beforehand).
 */
export function readKjvText(range = 'Gen1:1-Rev22:21'): string {
  const unavailable = kjvTextUnavailable();
  if (unavailable) throw new Error(unavailable);
  const out = spawnSync(KJV_PROGRAM, ['-f', range], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (out.error || out.status !== 0)
    throw new Error(`${KJV_PROGRAM} failed: ${out.error?.message ?? out.stderr}`);
  return out.stdout
    .split('\n')
    .filter((line) => /^\S+\d+:\d+ /.test(line))
    .map((line) => line.replace(/^\S+ /, '').trim())
    .join('\n');
}
