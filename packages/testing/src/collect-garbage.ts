import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let gc: (() => void) | undefined;

/**
 * Runs full collections, with a turn of the event loop after each, until the finalizers of
 * what was dropped (native memory behind ArrayBuffers, mappings) have run. Exposes `gc` to
 * this process on first use: no `--expose-gc` needed.
 */
export async function collectGarbage(rounds = 5): Promise<void> {
  if (!gc) {
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as () => void;
  }
  for (let i = 0; i < rounds; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
}
