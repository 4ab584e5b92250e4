import fs from 'node:fs';
import path from 'node:path';

/** Archive suffixes a model store entry may carry, as `load_models=ALL` takes them. */
const ARCHIVE = /\.(?:zip|tar|tar\.gz|tgz)$/;

/** A model in the model store: its name (the folder's, or the archive's without suffix). */
export interface StoreModel {
  readonly name: string;
  /** Relative to the store. */
  readonly entry: string;
}

/** The models the store holds: its folders and archives, hidden entries left out. */
export function storeModels(modelStore: string | undefined): StoreModel[] {
  if (!modelStore) return [];
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(modelStore, { withFileTypes: true });
  } catch {
    return [];
  }
  return (
    entries
      .filter((d) => !d.name.startsWith('.') && isModelEntry(modelStore, d))
      .map((d) => ({ name: d.name.replace(ARCHIVE, ''), entry: d.name }))
      .sort((a, b) => a.name.localeCompare(b.name))
      // A folder and an archive of one name are one model (the folder is what loads).
      .filter((m, i, all) => i === 0 || all[i - 1]!.name !== m.name)
  );
}

function isModelEntry(modelStore: string, entry: fs.Dirent): boolean {
  if (ARCHIVE.test(entry.name)) return entry.isFile() || entry.isSymbolicLink();
  if (entry.isDirectory()) return true;
  // A link counts when it leads to a folder; loading it checks that it stays in the store.
  if (!entry.isSymbolicLink()) return false;
  try {
    return fs.statSync(path.join(modelStore, entry.name)).isDirectory();
  } catch {
    return false;
  }
}

/** The store entry named `name` (a folder first, then an archive), or undefined. */
export function findStoreModel(
  modelStore: string | undefined,
  name: string,
): StoreModel | undefined {
  if (!modelStore) return undefined;
  for (const entry of [name, `${name}.zip`, `${name}.tar`, `${name}.tar.gz`, `${name}.tgz`]) {
    if (fs.existsSync(path.join(modelStore, entry))) return { name, entry };
  }
  return undefined;
}
