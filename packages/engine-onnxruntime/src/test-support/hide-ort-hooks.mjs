export async function resolve(specifier, context, nextResolve) {
  if (specifier === 'onnxruntime-node') {
    const error = new Error("Cannot find package 'onnxruntime-node' imported from Kiln");
    throw Object.assign(error, { code: 'ERR_MODULE_NOT_FOUND' });
  }
  return nextResolve(specifier, context);
}
