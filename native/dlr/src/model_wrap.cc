#include "model_wrap.h"

#include <utility>

#include "addon.h"
#include "dlr_codes.h"
#include "dlr_workers.h"
#include "input_tensors.h"
#include "js_values.h"
#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"

namespace kiln::dlr_addon {

Napi::Function ModelWrap::Define(Napi::Env env) {
  return DefineClass(env, "DlrModel",
                     {
                         InstanceAccessor<&ModelWrap::Inputs>("inputs"),
                         InstanceAccessor<&ModelWrap::Outputs>("outputs"),
                         InstanceAccessor<&ModelWrap::OutputNamesKnown>("outputNamesKnown"),
                         InstanceAccessor<&ModelWrap::Backend>("backend"),
                         InstanceAccessor<&ModelWrap::Busy>("busy"),
                         InstanceAccessor<&ModelWrap::Disposed>("disposed"),
                         InstanceMethod<&ModelWrap::Run>("run"),
                         InstanceMethod<&ModelWrap::Dispose>("dispose"),
                     });
}

Napi::Object ModelWrap::NewInstance(Napi::Env env, std::shared_ptr<DlrModel> model) {
  auto* holder = new std::shared_ptr<DlrModel>(std::move(model));
  auto external = Napi::External<std::shared_ptr<DlrModel>>::New(
      env, holder, [](Napi::Env, std::shared_ptr<DlrModel>* p) { delete p; });
  return AddonOf(env).model_constructor.New({external});
}

ModelWrap::ModelWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ModelWrap>(info) {
  KILN_NAPI_BEGIN
  napi::Check(info.Length() == 1 && info[0].IsExternal(), napi::code::kInvalidInput,
              "DlrModel cannot be constructed directly; use createModel()");
  model_ = *info[0].As<Napi::External<std::shared_ptr<DlrModel>>>().Data();
  KILN_NAPI_END(info.Env())
}

Napi::Value ModelWrap::Inputs(const Napi::CallbackInfo& info) {
  const auto& inputs = model_->metadata().inputs;
  Napi::Array array = Napi::Array::New(info.Env(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) array.Set(static_cast<uint32_t>(i), TensorInfoToJs(info.Env(), inputs[i]));
  return array;
}

Napi::Value ModelWrap::Outputs(const Napi::CallbackInfo& info) {
  const auto& outputs = model_->metadata().outputs;
  Napi::Array array = Napi::Array::New(info.Env(), outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    array.Set(static_cast<uint32_t>(i), TensorInfoToJs(info.Env(), outputs[i]));
  }
  return array;
}

Napi::Value ModelWrap::OutputNamesKnown(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), model_->metadata().output_names_known);
}

Napi::Value ModelWrap::Backend(const Napi::CallbackInfo& info) {
  const std::string& backend = model_->metadata().backend;
  return backend.empty() ? info.Env().Null() : Napi::String::New(info.Env(), backend);
}

Napi::Value ModelWrap::Busy(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), model_->busy()); }

Napi::Value ModelWrap::Disposed(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), disposing_);
}

Napi::Value ModelWrap::Run(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  napi::Check(!disposing_, napi::code::kClosed, "the DLR model is disposed");
  std::vector<InputTensor> inputs = InputsFromJs(model_->metadata(), napi::Arg(info, 0));
  napi::Check(model_->TryAcquire(), code::kPredictorBusy,
              "the DLR model is running; one handle runs one call at a time");
  return (new RunWorker(info.Env(), info.This().As<Napi::Object>(), model_, std::move(inputs)))->Start();
  KILN_NAPI_END(info.Env())
}

Napi::Value ModelWrap::Dispose(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  Napi::Env env = info.Env();
  if (disposing_) {
    Napi::Promise::Deferred done = Napi::Promise::Deferred::New(env);
    done.Resolve(env.Undefined());
    return done.Promise();
  }
  napi::Check(model_->TryAcquire(), code::kPredictorBusy, "the DLR model is running; dispose it when the run ends");
  disposing_ = true;
  return (new DeleteWorker(env, info.This().As<Napi::Object>(), model_))->Start();
  KILN_NAPI_END(info.Env())
}

}  // namespace kiln::dlr_addon
