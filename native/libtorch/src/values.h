// TorchScript values (c10::IValue) crossing to and from JavaScript.
//
// JavaScript side: a tensor is `{ dtype, shape, data }` or a TensorWrap; tuples and lists are
// arrays; string-keyed dicts are plain objects; int/float/bool/str scalars and None (null)
// pass as themselves. Inputs are converted with the method's declared argument types, so a
// JavaScript array becomes a tuple or a list as the model expects.
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <napi.h>

#include <functional>
#include <string>

namespace kiln::torch_addon {

// JavaScript thread: builds the value the model declared as `type`. Host tensors are copied
// (into page-locked memory when `pinned`); TensorWraps are used as they are.
c10::IValue ValueFromJs(const Napi::Value& value, const c10::TypePtr& type,
                        const std::string& what, bool pinned);

// Rebuilds `value` with every tensor replaced by `fn(tensor)`; containers keep their types.
c10::IValue MapTensors(const c10::IValue& value,
                       const std::function<at::Tensor(const at::Tensor&)>& fn);

// JavaScript thread: the JavaScript form of a value whose tensors are all contiguous CPU
// tensors, or, with `native_tensors`, a value whose tensors become TensorWraps wherever they
// live. Throws UNSUPPORTED_FORMAT for TorchScript types with no JavaScript form (objects…).
Napi::Value ValueToJs(Napi::Env env, const c10::IValue& value, bool native_tensors);

}  // namespace kiln::torch_addon
