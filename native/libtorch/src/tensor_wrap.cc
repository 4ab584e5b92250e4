#include "tensor_wrap.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "addon.h"
#include "device_copies.h"
#include "device_stream.h"
#include "dtypes.h"
#include "host_tensor.h"
#include "kiln/napi/errors.h"
#include "kiln/napi/promise_worker.h"
#include "runtime.h"

namespace kiln::torch_addon {
namespace {

class ToHostWorker : public napi::PromiseWorker {
 public:
  ToHostWorker(Napi::Env env, const Napi::Object& owner, at::Tensor tensor)
      : PromiseWorker(env, "kiln.libtorch.toHost", owner), tensor_(std::move(tensor)) {}

 private:
  void Run() override {
    RunOperatorsOnThisThreadAlone();
    c10::InferenceMode guard;
    host_ = ToHostTensor(tensor_);
    tensor_ = at::Tensor();
  }
  Napi::Value Result(Napi::Env env) override { return TensorToJs(env, host_); }

  at::Tensor tensor_;
  at::Tensor host_;
};

}  // namespace

at::Tensor ToHostTensor(const at::Tensor& tensor) {
  if (tensor.device().is_cpu()) return tensor.contiguous();
  DeviceStreamScope stream(tensor.device());
  at::Tensor host = DownloadAsync(tensor);
  stream.Synchronize();
  return host;
}

Napi::Function TensorWrap::Define(Napi::Env env) {
  return DefineClass(env, "TensorWrap",
                     {
                         InstanceAccessor<&TensorWrap::DType>("dtype"),
                         InstanceAccessor<&TensorWrap::Shape>("shape"),
                         InstanceAccessor<&TensorWrap::Device>("device"),
                         InstanceAccessor<&TensorWrap::Disposed>("disposed"),
                         InstanceMethod<&TensorWrap::ToHost>("toHost"),
                         InstanceMethod<&TensorWrap::Dispose>("dispose"),
                     });
}

Napi::Object TensorWrap::NewInstance(Napi::Env env, const at::Tensor& tensor) {
  auto* copy = new at::Tensor(tensor);
  Napi::External<at::Tensor> external =
      Napi::External<at::Tensor>::New(env, copy, [](Napi::Env, at::Tensor* t) { delete t; });
  return AddonOf(env).tensor_constructor.New({external});
}

std::optional<at::Tensor> TensorWrap::TensorOf(const Napi::Value& value) {
  if (!value.IsObject()) return std::nullopt;
  Napi::Object object = value.As<Napi::Object>();
  if (!object.InstanceOf(AddonOf(value.Env()).tensor_constructor.Value())) return std::nullopt;
  return TensorWrap::Unwrap(object)->Live();
}

TensorWrap::TensorWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<TensorWrap>(info) {
  KILN_NAPI_BEGIN
  napi::Check(info.Length() == 1 && info[0].IsExternal(), napi::code::kInvalidInput,
              "TensorWrap cannot be constructed from JavaScript; models and ops create them");
  tensor_ = *info[0].As<Napi::External<at::Tensor>>().Data();
  KILN_NAPI_END(info.Env())
}

const at::Tensor& TensorWrap::Live() const {
  napi::Check(!disposed_, napi::code::kClosed, "the native tensor was disposed");
  return tensor_;
}

Napi::Value TensorWrap::DType(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  return Napi::String::New(info.Env(), NameOfScalarType(Live().scalar_type()));
  KILN_NAPI_END(info.Env())
}

Napi::Value TensorWrap::Shape(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  const at::Tensor& tensor = Live();
  Napi::Array shape = Napi::Array::New(info.Env(), tensor.dim());
  for (int64_t i = 0; i < tensor.dim(); ++i) {
    shape.Set(static_cast<uint32_t>(i), Napi::Number::New(info.Env(), static_cast<double>(tensor.size(i))));
  }
  return shape;
  KILN_NAPI_END(info.Env())
}

Napi::Value TensorWrap::Device(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  return Napi::String::New(info.Env(), Live().device().str());
  KILN_NAPI_END(info.Env())
}

Napi::Value TensorWrap::Disposed(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), disposed_);
}

Napi::Value TensorWrap::ToHost(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  return (new ToHostWorker(info.Env(), info.This().As<Napi::Object>(), Live()))->Start();
  KILN_NAPI_END_ASYNC(info.Env())
}

Napi::Value TensorWrap::Dispose(const Napi::CallbackInfo& info) {
  tensor_ = at::Tensor();
  disposed_ = true;
  return info.Env().Undefined();
}

}  // namespace kiln::torch_addon
