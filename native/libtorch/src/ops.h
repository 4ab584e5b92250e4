// Tensor operations the built-in translators need (softmax, top-k, argmax, normalize,
// resize), run in LibTorch off the JavaScript thread. Each takes a JavaScript tensor or a
// TensorWrap and resolves the same kind: host tensors come back as `{ dtype, shape, data }`,
// TensorWraps as TensorWraps on the same device.
#pragma once

#include <napi.h>

namespace kiln::torch_addon {

// The `ops` object of the addon's exports. Every function is async (returns a promise) and
// rejects INVALID_INPUT for arguments that do not fit the tensor.
Napi::Object CreateOps(Napi::Env env);

}  // namespace kiln::torch_addon
