#include "forward_call.h"

#include <string>
#include <utility>
#include <vector>

#include "forward_settings.h"
#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"
#include "module_workers.h"
#include "values.h"

namespace kiln::torch_addon {
namespace {

using napi::code::kInvalidInput;

std::string ArgumentList(const std::vector<c10::Argument>& arguments) {
  std::string list;
  for (size_t i = 1; i < arguments.size(); ++i) {
    if (!list.empty()) list += ", ";
    list += arguments[i].name();
  }
  return list;
}

// Converts forward's arguments on the JavaScript thread, checking their number here so that a
// wrong call is an INVALID_INPUT, not an engine failure.
std::vector<c10::IValue> ForwardInputs(LoadedModule& module, const Napi::Value& value) {
  const std::vector<c10::Argument>& arguments = module.ForwardSchema().arguments();
  Napi::Array args = napi::RequireArray(value, "forward arguments");
  const size_t declared = arguments.size() - 1;  // without self
  size_t required = 0;
  for (size_t i = 1; i < arguments.size(); ++i) {
    if (!arguments[i].default_value()) required = i;
  }
  napi::Check(args.Length() <= declared && args.Length() >= required, kInvalidInput,
              "forward(" + ArgumentList(arguments) + ") takes " +
                  (required == declared ? std::to_string(declared)
                                        : std::to_string(required) + " to " +
                                              std::to_string(declared)) +
                  " inputs, but " + std::to_string(args.Length()) + " were given");
  const bool pinned = module.device.is_cuda();
  std::vector<c10::IValue> inputs;
  inputs.reserve(args.Length());
  for (uint32_t i = 0; i < args.Length(); ++i) {
    const c10::Argument& argument = arguments[i + 1];
    inputs.push_back(
        ValueFromJs(args.Get(i), argument.type(), "input '" + argument.name() + "'", pinned));
  }
  return inputs;
}

}  // namespace

Napi::Value StartForward(const Napi::CallbackInfo& info, std::shared_ptr<LoadedModule> module,
                         std::shared_ptr<ForwardThread> thread) {
  std::vector<c10::IValue> inputs = ForwardInputs(*module, napi::Arg(info, 0));
  ForwardSettings settings = ForwardSettings::FromJs(napi::Arg(info, 1));
  return (new ForwardWorker(info.Env(), info.This().As<Napi::Object>(), std::move(module),
                            std::move(thread), std::move(inputs), settings))
      ->Start();
}

}  // namespace kiln::torch_addon
