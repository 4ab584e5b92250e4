#include "context_wrap.h"

#include <utility>

#include "addon.h"
#include "forward_call.h"
#include "kiln/napi/errors.h"

namespace kiln::torch_addon {

Napi::Function ContextWrap::Define(Napi::Env env) {
  return DefineClass(env, "ContextWrap",
                     {
                         InstanceMethod<&ContextWrap::Forward>("forward"),
                         InstanceMethod<&ContextWrap::Dispose>("dispose"),
                         InstanceAccessor<&ContextWrap::Disposed>("disposed"),
                     });
}

Napi::Object ContextWrap::NewInstance(Napi::Env env, std::shared_ptr<LoadedModule> module) {
  auto* holder = new std::shared_ptr<LoadedModule>(std::move(module));
  auto external = Napi::External<std::shared_ptr<LoadedModule>>::New(
      env, holder, [](Napi::Env, std::shared_ptr<LoadedModule>* p) { delete p; });
  return AddonOf(env).context_constructor.New({external});
}

ContextWrap::ContextWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ContextWrap>(info) {
  KILN_NAPI_BEGIN
  napi::Check(info.Length() == 1 && info[0].IsExternal(), napi::code::kInvalidInput,
              "ContextWrap cannot be constructed directly; use ModuleWrap.createContext");
  module_ = *info[0].As<Napi::External<std::shared_ptr<LoadedModule>>>().Data();
  thread_ = std::make_shared<ForwardThread>();
  KILN_NAPI_END(info.Env())
}

Napi::Value ContextWrap::Forward(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  napi::Check(module_ != nullptr, napi::code::kClosed, "the execution context was disposed");
  return StartForward(info, module_, thread_);
  KILN_NAPI_END_ASYNC(info.Env())
}

Napi::Value ContextWrap::Dispose(const Napi::CallbackInfo& info) {
  // A forward still running holds its own references; the thread ends after it.
  module_.reset();
  thread_.reset();
  return info.Env().Undefined();
}

Napi::Value ContextWrap::Disposed(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), module_ == nullptr);
}

}  // namespace kiln::torch_addon
