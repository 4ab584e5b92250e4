// Tensors crossing between JavaScript and LibTorch. Both directions run on the JavaScript
// thread. A JavaScript tensor is `{ dtype, shape, data }` with `data` a TypedArray holding the
// row-major elements (@kiln/core's storage: bool as bytes, float16/bfloat16 as raw bits).
#pragma once

#include <ATen/core/Tensor.h>
#include <napi.h>

#include <string>

namespace kiln::torch_addon {

// Whether `value` looks like a JavaScript tensor (an object with dtype, shape and data).
bool IsJsTensor(const Napi::Value& value);

// Copies a JavaScript tensor into a new CPU tensor (page-locked when `pinned`, for fast
// asynchronous uploads to a GPU). `what` names it in error messages.
at::Tensor TensorFromJs(const Napi::Object& object, const std::string& what, bool pinned);

// A JavaScript tensor over a CPU tensor. Shares the tensor's memory when `tensor` (passed by
// its only reference) is all that holds it; copies otherwise, so that JavaScript can never
// write into a weight or into memory another tensor still reads.
Napi::Object TensorToJs(Napi::Env env, const at::Tensor& tensor);

}  // namespace kiln::torch_addon
