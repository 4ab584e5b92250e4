// A TorchScript module as loaded once and shared: every execution context of a model runs
// forward on the same LoadedModule, so weights are held once. Nothing mutates it after load,
// which is what makes concurrent forwards on it safe.
#pragma once

#include <torch/script.h>

#include <string>

namespace kiln::torch_addon {

struct LoadedModule {
  torch::jit::Module module;
  c10::Device device{c10::kCPU};
  // The file it came from, or "<defined>" for modules compiled from source.
  std::string origin;
  bool optimized_for_inference = false;

  const c10::FunctionSchema& ForwardSchema() {
    return module.get_method("forward").function().getSchema();
  }
};

}  // namespace kiln::torch_addon
