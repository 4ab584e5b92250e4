// Preloaded (--import) by a test: makes onnxruntime-node unresolvable, as on a machine
// where it was never installed, for `import` (module hooks) and for `require` (the CommonJS
// resolver, which Node 20's module hooks do not reach).
import Module, { register } from 'node:module';

register('./hide-ort-hooks.mjs', import.meta.url);

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === 'onnxruntime-node' || request.startsWith('onnxruntime-node/')) {
    const error = new Error(`Cannot find module '${request}'`);
    error.code = 'MODULE_NOT_FOUND';
    throw error;
  }
  return resolveFilename.call(this, request, ...rest);
};
