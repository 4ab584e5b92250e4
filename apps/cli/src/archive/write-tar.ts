import { create } from 'tar';
import type { PackedFile } from './model-folder-files.js';

/**
 * Writes files into a tar at `target`, gzip-compressed at level `gzip` unless it is false.
 * Entries are portable: no owner names or ids of this machine. `onBytes` hears of each file
 * as it is added, for a progress bar.
 */
export async function writeTar(
  root: string,
  files: readonly PackedFile[],
  target: string,
  gzip: number | false,
  onBytes: (bytes: number) => void = () => undefined,
): Promise<void> {
  const sizes = new Map(files.map((f) => [f.path, f.bytes]));
  await create(
    {
      file: target,
      // Called as each file is taken in: progress by whole files.
      filter: (entry) => {
        onBytes(sizes.get(entry) ?? 0);
        return true;
      },
      cwd: root,
      portable: true,
      gzip: gzip === false ? false : { level: gzip },
    },
    files.map((f) => f.path),
  );
}
