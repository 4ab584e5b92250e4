// The addon's per-environment state. Node may load the addon in several environments (the
// main thread and worker threads); each gets its own instance holding its class constructors.
#pragma once

#include <napi.h>

namespace kiln::torch_addon {

class LibTorchAddon : public Napi::Addon<LibTorchAddon> {
 public:
  LibTorchAddon(Napi::Env env, Napi::Object exports);

  Napi::FunctionReference module_constructor;
  Napi::FunctionReference context_constructor;
  Napi::FunctionReference tensor_constructor;

 private:
  // Sync. Facts about this LibTorch build and machine.
  Napi::Value RuntimeInfo(const Napi::CallbackInfo& info);
  // Sync. Global toggles and thread pool sizes as seen from the calling thread.
  Napi::Value GetGlobals(const Napi::CallbackInfo& info);
  // Sync. Sets `{ mkldnn, cudnn, cudnnBenchmark, numThreads, numInteropThreads }` (each
  // optional). Throws INVALID_CONFIG when the inter-op pool is already fixed at another size.
  Napi::Value SetGlobals(const Napi::CallbackInfo& info);
};

inline LibTorchAddon& AddonOf(Napi::Env env) { return *env.GetInstanceData<LibTorchAddon>(); }

}  // namespace kiln::torch_addon
