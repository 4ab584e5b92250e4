#include "library_wrap.h"

#include <string>
#include <utility>

#include "addon.h"
#include "dlr_workers.h"
#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"

namespace kiln::dlr_addon {

namespace {

using napi::code::kInvalidConfig;
using napi::code::kInvalidInput;

int IntWithin(const Napi::Object& request, const char* key, int64_t fallback, int64_t low, int64_t high) {
  const int64_t value = napi::OptionalInt(request, key).value_or(fallback);
  napi::Check(value >= low && value <= high, kInvalidConfig,
              std::string(key) + " must be within " + std::to_string(low) + ".." + std::to_string(high));
  return static_cast<int>(value);
}

}  // namespace

Napi::Function LibraryWrap::Define(Napi::Env env) {
  return DefineClass(env, "DlrLibrary",
                     {
                         InstanceAccessor<&LibraryWrap::Path>("path"),
                         InstanceAccessor<&LibraryWrap::Version>("version"),
                         InstanceAccessor<&LibraryWrap::MissingOptional>("missingOptional"),
                         InstanceMethod<&LibraryWrap::CreateModel>("createModel"),
                         InstanceMethod<&LibraryWrap::DeviceTypeOf>("deviceTypeOf"),
                     });
}

Napi::Object LibraryWrap::NewInstance(Napi::Env env, std::shared_ptr<const DlrLibrary> library) {
  auto* holder = new std::shared_ptr<const DlrLibrary>(std::move(library));
  auto external = Napi::External<std::shared_ptr<const DlrLibrary>>::New(
      env, holder, [](Napi::Env, std::shared_ptr<const DlrLibrary>* p) { delete p; });
  return AddonOf(env).library_constructor.New({external});
}

LibraryWrap::LibraryWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<LibraryWrap>(info) {
  KILN_NAPI_BEGIN
  napi::Check(info.Length() == 1 && info[0].IsExternal(), kInvalidInput,
              "DlrLibrary cannot be constructed directly; use openLibrary()");
  library_ = *info[0].As<Napi::External<std::shared_ptr<const DlrLibrary>>>().Data();
  KILN_NAPI_END(info.Env())
}

Napi::Value LibraryWrap::Path(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), library_->path);
}

Napi::Value LibraryWrap::Version(const Napi::CallbackInfo& info) {
  if (library_->version.empty()) return info.Env().Null();
  return Napi::String::New(info.Env(), library_->version);
}

Napi::Value LibraryWrap::MissingOptional(const Napi::CallbackInfo& info) {
  Napi::Array names = Napi::Array::New(info.Env(), library_->missing_optional.size());
  for (size_t i = 0; i < library_->missing_optional.size(); ++i) {
    names.Set(static_cast<uint32_t>(i), library_->missing_optional[i]);
  }
  return names;
}

Napi::Value LibraryWrap::CreateModel(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  Napi::Object request = napi::RequireObject(napi::Arg(info, 0), "model request");
  CreateRequest create;
  create.model_path = napi::RequireString(request.Get("modelPath"), "modelPath");
  napi::Check(!create.model_path.empty(), kInvalidInput, "modelPath must not be empty");
  create.device_type = IntWithin(request, "deviceType", 1, 1, 64);
  create.device_id = IntWithin(request, "deviceId", 0, 0, 1024);
  create.num_threads = IntWithin(request, "numThreads", 0, 0, 4096);
  return (new CreateModelWorker(info.Env(), info.This().As<Napi::Object>(), library_, std::move(create)))
      ->Start();
  KILN_NAPI_END(info.Env())
}

Napi::Value LibraryWrap::DeviceTypeOf(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  std::string path = napi::RequireString(napi::Arg(info, 0), "modelPath");
  return (new DeviceTypeWorker(info.Env(), info.This().As<Napi::Object>(), library_, std::move(path)))->Start();
  KILN_NAPI_END(info.Env())
}

}  // namespace kiln::dlr_addon
