// TensorWrap: an opaque handle to a LibTorch tensor that stays where it is (on the GPU for a
// CUDA model), so one step's output can feed the next step without a round trip through
// JavaScript memory. Explicit dispose() frees it without waiting for garbage collection.
#pragma once

#include <ATen/core/Tensor.h>
#include <napi.h>

#include <optional>

namespace kiln::torch_addon {

class TensorWrap : public Napi::ObjectWrap<TensorWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  // A new JavaScript handle owning `tensor`.
  static Napi::Object NewInstance(Napi::Env env, const at::Tensor& tensor);
  // The tensor behind `value` when it is a TensorWrap; throws CLOSED when it was disposed.
  static std::optional<at::Tensor> TensorOf(const Napi::Value& value);

  // Only NewInstance constructs these; JavaScript cannot.
  explicit TensorWrap(const Napi::CallbackInfo& info);

 private:
  const at::Tensor& Live() const;

  // Sync getters.
  Napi::Value DType(const Napi::CallbackInfo& info);
  Napi::Value Shape(const Napi::CallbackInfo& info);
  Napi::Value Device(const Napi::CallbackInfo& info);
  Napi::Value Disposed(const Napi::CallbackInfo& info);
  // Async: resolves `{ dtype, shape, data }` with the tensor's values copied to the host.
  Napi::Value ToHost(const Napi::CallbackInfo& info);
  // Sync, idempotent: releases the tensor.
  Napi::Value Dispose(const Napi::CallbackInfo& info);

  at::Tensor tensor_;
  bool disposed_ = false;
};

// Pool thread: `tensor` as a contiguous CPU tensor, waiting for any device copy to finish.
at::Tensor ToHostTensor(const at::Tensor& tensor);

}  // namespace kiln::torch_addon
