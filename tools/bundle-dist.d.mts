/** The entries a package asks to bundle, from package.json `kiln.bundle`; none when absent. */
export function bundleEntries(packageDir: string): string[];
/** Writes bundle/ for a built package; returns the files it wrote, relative to the package. */
export function bundleDist(packageDir: string): Promise<string[]>;
/** Whether a module's source resolves files relative to its own URL. */
export function readsPathsFromItsUrl(source: string): boolean;
