#include "forward_settings.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>

#include "kiln/napi/args.h"

namespace kiln::torch_addon {

ForwardSettings ForwardSettings::FromJs(const Napi::Value& options) {
  ForwardSettings settings;
  if (napi::IsAbsent(options)) return settings;
  Napi::Object object = napi::RequireObject(options, "forward options");
  settings.graph_optimizer = napi::OptionalBool(object, "graphOptimizer").value_or(true);
  settings.num_threads = napi::OptionalInt(object, "numThreads").value_or(0);
  napi::Check(settings.num_threads >= 0 && settings.num_threads <= 4096,
              napi::code::kInvalidConfig, "numThreads must be between 0 and 4096");
  settings.backend.mkldnn = napi::OptionalBool(object, "mkldnn");
  settings.backend.cudnn = napi::OptionalBool(object, "cudnn");
  settings.backend.cudnn_benchmark = napi::OptionalBool(object, "cudnnBenchmark");
  settings.native_outputs = napi::OptionalBool(object, "nativeOutputs").value_or(false);
  settings.record_ops = napi::OptionalBool(object, "recordOps").value_or(false);
  settings.capture_graph = napi::OptionalBool(object, "captureGraph").value_or(false);
  return settings;
}

void ApplyOnThisThread(const ForwardSettings& settings) {
  torch::jit::setGraphExecutorOptimize(settings.graph_optimizer);
  if (settings.num_threads > 0) SetIntraOpThreads(settings.num_threads);
  ApplyBackendFlags(settings.backend);
}

ObservedSettings ObserveThisThread() {
  static std::atomic<int64_t> next_thread{1};
  thread_local const int64_t thread = next_thread++;
  return {torch::jit::getGraphExecutorOptimize(), at::get_num_threads(), ReadBackendState(),
          thread};
}

}  // namespace kiln::torch_addon
