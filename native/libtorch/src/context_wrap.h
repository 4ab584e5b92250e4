// ContextWrap: an execution context of a loaded module, exported to JavaScript. It shares the
// module (weights held once) and owns one ForwardThread, on which all its forwards run, one at
// a time. An opaque handle: dispose() releases the thread once running work is done.
#pragma once

#include <napi.h>

#include <memory>

#include "forward_thread.h"
#include "loaded_module.h"

namespace kiln::torch_addon {

class ContextWrap : public Napi::ObjectWrap<ContextWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  static Napi::Object NewInstance(Napi::Env env, std::shared_ptr<LoadedModule> module);

  // Only NewInstance constructs these; JavaScript cannot.
  explicit ContextWrap(const Napi::CallbackInfo& info);

 private:
  // Async. forward(args, settings) resolves `{ value, observed, ops?, graph?, startedUs,
  // finishedUs }`, run on this context's thread.
  Napi::Value Forward(const Napi::CallbackInfo& info);
  // Sync, idempotent.
  Napi::Value Dispose(const Napi::CallbackInfo& info);
  Napi::Value Disposed(const Napi::CallbackInfo& info);

  std::shared_ptr<LoadedModule> module_;
  std::shared_ptr<ForwardThread> thread_;
};

}  // namespace kiln::torch_addon
