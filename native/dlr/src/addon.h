// The addon's per-environment state. Node may load the addon in several environments (the
// main thread and worker threads); each gets its own instance holding its class constructors.
// DLR libraries and models are process-wide C++ objects shared safely between them.
#pragma once

#include <napi.h>

namespace kiln::dlr_addon {

class DlrAddon : public Napi::Addon<DlrAddon> {
 public:
  DlrAddon(Napi::Env env, Napi::Object exports);

  Napi::FunctionReference library_constructor;
  Napi::FunctionReference model_constructor;

 private:
  // Async. openLibrary(path) resolves a library object; rejects ENGINE_UNAVAILABLE with the
  // loader's reason (file not found, wrong architecture, not a DLR library…).
  Napi::Value OpenLibrary(const Napi::CallbackInfo& info);
  // Sync. defaultTvmThreads(n) sets TVM_NUM_THREADS in the process environment unless it is
  // already set, and returns the value in force. TVM reads it when a thread first runs a
  // model, and worker threads' process.env does not reach the real environment.
  Napi::Value DefaultTvmThreads(const Napi::CallbackInfo& info);
};

inline DlrAddon& AddonOf(Napi::Env env) { return *env.GetInstanceData<DlrAddon>(); }

}  // namespace kiln::dlr_addon
