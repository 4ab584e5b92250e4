// ModuleWrap: a loaded TorchScript module, exported to JavaScript. An opaque handle: it owns
// one reference to the shared LoadedModule; dispose() drops it (forwards already running keep
// their own reference and finish normally).
#pragma once

#include <napi.h>

#include <memory>

#include "loaded_module.h"

namespace kiln::torch_addon {

class ModuleWrap : public Napi::ObjectWrap<ModuleWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  static Napi::Object NewInstance(Napi::Env env, std::shared_ptr<LoadedModule> module);

  // Only NewInstance constructs these; JavaScript cannot.
  explicit ModuleWrap(const Napi::CallbackInfo& info);

 private:
  std::shared_ptr<LoadedModule> Live() const;

  // Async, static. load(path, { device, mapLocation, extraFiles, optimizeForInference })
  // resolves `{ module, extraFiles }`; rejects MODEL_LOAD_FAILED.
  static Napi::Value Load(const Napi::CallbackInfo& info);
  // Sync, static. compile({ name, source, parameters, buffers }) compiles TorchScript source
  // into a new module (for tooling and tests); throws INVALID_INPUT for bad source.
  static Napi::Value Compile(const Napi::CallbackInfo& info);
  // Async. forward(args, settings) resolves `{ value, observed, ops?, graph?, startedUs,
  // finishedUs }`, run on a thread of its own that ends with it (RunOnPassingThread).
  Napi::Value Forward(const Napi::CallbackInfo& info);
  // Sync. A new execution context (ContextWrap) sharing this module, with a thread of its own.
  Napi::Value CreateContext(const Napi::CallbackInfo& info);
  // Async. save(path, extraFiles?) writes the module as a TorchScript archive.
  Napi::Value Save(const Napi::CallbackInfo& info);
  // Sync. Methods, forward's schema, parameter count and bytes, device.
  Napi::Value Describe(const Napi::CallbackInfo& info);
  // Sync, idempotent.
  Napi::Value Dispose(const Napi::CallbackInfo& info);
  Napi::Value Disposed(const Napi::CallbackInfo& info);

  std::shared_ptr<LoadedModule> module_;
};

}  // namespace kiln::torch_addon
