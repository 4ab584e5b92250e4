import type { ChildProcessWithoutNullStreams } from 'node:child_process';

/**
 * Waits until what a child writes (from now on) to `stream` matches, or fails after `ms`. The
 * banner and model states are on stderr; stdout carries JSON log lines. Both streams are read,
 * so that the child never blocks on a full pipe.
 */
export function waitFor(
  child: ChildProcessWithoutNullStreams,
  pattern: RegExp,
  ms: number,
  stream: 'stderr' | 'stdout' = 'stderr',
): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const look = (chunk: Buffer) => {
      seen += chunk.toString();
      const match = seen.match(pattern);
      if (match) {
        clearTimeout(timer);
        child[stream].off('data', look);
        resolve(match);
      }
    };
    const timer = setTimeout(() => {
      child[stream].off('data', look);
      reject(new Error(`no ${pattern} within ${ms} ms; output so far:\n${seen}`));
    }, ms);
    child.stdout.on('data', () => undefined);
    child.stderr.on('data', () => undefined);
    child[stream].on('data', look);
  });
}
