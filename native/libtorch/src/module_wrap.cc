#include "module_wrap.h"

#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "addon.h"
#include "context_wrap.h"
#include "forward_call.h"
#include "host_tensor.h"
#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"
#include "module_workers.h"
#include "runtime.h"
#include "values.h"

namespace kiln::torch_addon {
namespace {

using napi::code::kInvalidInput;

void RegisterTensors(torch::jit::Module& module, const Napi::Object& spec, const char* key,
                     bool is_buffer) {
  Napi::Value value = spec.Get(key);
  if (napi::IsAbsent(value)) return;
  Napi::Object tensors = napi::RequireObject(value, key);
  Napi::Array names = tensors.GetPropertyNames();
  for (uint32_t i = 0; i < names.Length(); ++i) {
    const std::string name = names.Get(i).ToString().Utf8Value();
    Napi::Value tensor = tensors.Get(name);
    napi::Check(IsJsTensor(tensor), kInvalidInput,
                std::string(key) + "." + name + " must be a tensor { dtype, shape, data }");
    at::Tensor data = TensorFromJs(tensor.As<Napi::Object>(), std::string(key) + "." + name, false);
    if (is_buffer) {
      module.register_buffer(name, data);
    } else {
      module.register_parameter(name, data, /*is_buffer=*/false);
    }
  }
}

template <typename NamedTensors>
Napi::Object DescribeTensors(Napi::Env env, const NamedTensors& tensors) {
  double count = 0;
  double bytes = 0;
  for (const auto& entry : tensors) {
    count += 1;
    bytes += static_cast<double>(entry.value.nbytes());
  }
  Napi::Object result = Napi::Object::New(env);
  result.Set("count", count);
  result.Set("bytes", bytes);
  return result;
}

}  // namespace

Napi::Function ModuleWrap::Define(Napi::Env env) {
  return DefineClass(env, "ModuleWrap",
                     {
                         StaticMethod<&ModuleWrap::Load>("load"),
                         StaticMethod<&ModuleWrap::Compile>("compile"),
                         InstanceMethod<&ModuleWrap::Forward>("forward"),
                         InstanceMethod<&ModuleWrap::CreateContext>("createContext"),
                         InstanceMethod<&ModuleWrap::Save>("save"),
                         InstanceMethod<&ModuleWrap::Describe>("describe"),
                         InstanceMethod<&ModuleWrap::Dispose>("dispose"),
                         InstanceAccessor<&ModuleWrap::Disposed>("disposed"),
                     });
}

Napi::Object ModuleWrap::NewInstance(Napi::Env env, std::shared_ptr<LoadedModule> module) {
  auto* holder = new std::shared_ptr<LoadedModule>(std::move(module));
  auto external = Napi::External<std::shared_ptr<LoadedModule>>::New(
      env, holder, [](Napi::Env, std::shared_ptr<LoadedModule>* p) { delete p; });
  return AddonOf(env).module_constructor.New({external});
}

ModuleWrap::ModuleWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ModuleWrap>(info) {
  KILN_NAPI_BEGIN
  napi::Check(info.Length() == 1 && info[0].IsExternal(), kInvalidInput,
              "ModuleWrap cannot be constructed directly; use ModuleWrap.load or compile");
  module_ = *info[0].As<Napi::External<std::shared_ptr<LoadedModule>>>().Data();
  KILN_NAPI_END(info.Env())
}

std::shared_ptr<LoadedModule> ModuleWrap::Live() const {
  napi::Check(module_ != nullptr, napi::code::kClosed, "the TorchScript module was disposed");
  return module_;
}

Napi::Value ModuleWrap::Load(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  LoadRequest request;
  request.path = napi::RequireString(napi::Arg(info, 0), "path");
  Napi::Value options_value = napi::Arg(info, 1);
  if (!napi::IsAbsent(options_value)) {
    Napi::Object options = napi::RequireObject(options_value, "load options");
    request.device = ParseDevice(napi::OptionalString(options, "device").value_or("cpu"));
    request.map_location = napi::OptionalBool(options, "mapLocation").value_or(true);
    request.extra_files = napi::OptionalStringArray(options, "extraFiles");
    request.optimize_for_inference =
        napi::OptionalBool(options, "optimizeForInference").value_or(false);
  }
  return (new LoadWorker(info.Env(), std::move(request)))->Start();
  KILN_NAPI_END_ASYNC(info.Env())
}

Napi::Value ModuleWrap::Compile(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  Napi::Object spec = napi::RequireObject(napi::Arg(info, 0), "module spec");
  const std::string source = napi::RequireString(spec.Get("source"), "source");
  auto loaded = std::make_shared<LoadedModule>();
  loaded->module = torch::jit::Module(napi::OptionalString(spec, "name").value_or("KilnModule"));
  loaded->origin = "<defined>";
  // Python's nn.Module has this attribute; freezing (optimize_for_inference) and eval() rely
  // on it, so compiled modules get it too.
  loaded->module.register_attribute("training", c10::BoolType::get(), false);
  RegisterTensors(loaded->module, spec, "parameters", false);
  RegisterTensors(loaded->module, spec, "buffers", true);
  try {
    loaded->module.define(source);
  } catch (...) {
    // Whatever the compiler threw, the cause is the caller's source.
    throw napi::NativeError(kInvalidInput, "TorchScript source does not compile: " +
                                               napi::DescribeCurrentException().message);
  }
  napi::Check(loaded->module.find_method("forward").has_value(), kInvalidInput,
              "the source defines no forward method");
  loaded->module.eval();
  return NewInstance(info.Env(), std::move(loaded));
  KILN_NAPI_END(info.Env())
}

Napi::Value ModuleWrap::Forward(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  return StartForward(info, Live(), nullptr);
  KILN_NAPI_END_ASYNC(info.Env())
}

Napi::Value ModuleWrap::CreateContext(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  return ContextWrap::NewInstance(info.Env(), Live());
  KILN_NAPI_END(info.Env())
}

Napi::Value ModuleWrap::Save(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  std::shared_ptr<LoadedModule> module = Live();
  const std::string path = napi::RequireString(napi::Arg(info, 0), "path");
  std::unordered_map<std::string, std::string> extra_files;
  Napi::Value extra = napi::Arg(info, 1);
  if (!napi::IsAbsent(extra)) {
    for (auto& [name, content] : napi::RequireStringMap(extra, "extraFiles")) {
      extra_files.emplace(name, content);
    }
  }
  return (new SaveWorker(info.Env(), info.This().As<Napi::Object>(), std::move(module), path,
                         std::move(extra_files)))
      ->Start();
  KILN_NAPI_END_ASYNC(info.Env())
}

Napi::Value ModuleWrap::Describe(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  Napi::Env env = info.Env();
  std::shared_ptr<LoadedModule> module = Live();
  Napi::Object result = Napi::Object::New(env);
  result.Set("origin", module->origin);
  result.Set("device", module->device.str());
  result.Set("optimizedForInference", module->optimized_for_inference);

  std::vector<torch::jit::Method> methods = module->module.get_methods();
  Napi::Array method_names = Napi::Array::New(env, methods.size());
  for (size_t i = 0; i < methods.size(); ++i) {
    method_names.Set(static_cast<uint32_t>(i), methods[i].name());
  }
  result.Set("methods", method_names);

  const c10::FunctionSchema& schema = module->ForwardSchema();
  Napi::Object forward = Napi::Object::New(env);
  std::ostringstream text;
  text << schema;
  forward.Set("schema", text.str());
  Napi::Array arguments = Napi::Array::New(env);
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    const c10::Argument& argument = schema.arguments()[i];
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("name", argument.name());
    entry.Set("type", argument.type()->annotation_str());
    entry.Set("hasDefault", argument.default_value().has_value());
    arguments.Set(static_cast<uint32_t>(i - 1), entry);
  }
  forward.Set("arguments", arguments);
  std::string returns;
  for (const c10::Argument& value : schema.returns()) {
    if (!returns.empty()) returns += ", ";
    returns += value.type()->annotation_str();
  }
  forward.Set("returns", returns);
  result.Set("forward", forward);
  result.Set("parameters", DescribeTensors(env, module->module.named_parameters()));
  result.Set("buffers", DescribeTensors(env, module->module.named_buffers()));
  return result;
  KILN_NAPI_END(info.Env())
}

Napi::Value ModuleWrap::Dispose(const Napi::CallbackInfo& info) {
  module_.reset();
  return info.Env().Undefined();
}

Napi::Value ModuleWrap::Disposed(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), module_ == nullptr);
}

}  // namespace kiln::torch_addon
