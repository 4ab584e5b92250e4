/** One entry of the packs.json that tools/pack-all.mjs writes. */
export interface Pack {
  readonly name: string;
  readonly version: string;
  /** The tarball's path. */
  readonly file: string;
  readonly size: number;
  readonly unpackedSize: number;
  readonly entryCount: number;
  /** The @kiln packages it depends on. */
  readonly kilnDependencies: readonly string[];
}

export function readPacks(packsDir: string): Pack[];

export function tarballsFor(packs: readonly Pack[], names: readonly string[]): string[];
