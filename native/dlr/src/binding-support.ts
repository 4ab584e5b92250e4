import { checkEngine } from '@kiln/testing';
import { loadDlrAddon } from './addon-loader.js';
import { buildConformanceLibrary } from './conformance-library.js';
import type { DlrAddon, DlrLibraryHandle } from './native-types.js';

export interface ConformanceBinding {
  readonly addon: DlrAddon;
  readonly library: DlrLibraryHandle;
  readonly libraryPath: string;
}

/**
 * The addon with the conformance libdlr opened, or undefined when either cannot be had here
 * (tests then skip with the reason, or fail when KILN_REQUIRE_ENGINES names DLR).
 */
export async function conformanceBinding(): Promise<ConformanceBinding | undefined> {
  let binding: ConformanceBinding | undefined;
  await checkEngine('DLR', async () => {
    const libraryPath = await buildConformanceLibrary();
    const addon = loadDlrAddon();
    binding = { addon, library: await addon.openLibrary(libraryPath), libraryPath };
    return null;
  });
  return binding;
}
