/** The npm package that provides each of Kiln's engines, by engine name (lower case). */
export const ENGINE_PACKAGES: Readonly<Record<string, string>> = {
  onnxruntime: '@kiln/engine-onnxruntime',
  pytorch: '@kiln/engine-libtorch',
  tensorflow: '@kiln/engine-tensorflow',
  dlr: '@kiln/engine-dlr',
};

/** "install @kiln/engine-xxx" for a known engine that is not registered, else undefined. */
export function installHint(engineName: string): string | undefined {
  const pkg = ENGINE_PACKAGES[engineName.toLowerCase()];
  return pkg ? `install ${pkg} (npm install ${pkg})` : undefined;
}
