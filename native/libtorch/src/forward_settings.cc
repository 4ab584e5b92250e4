#include "forward_settings.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <string>

#if defined(__linux__)
#include <link.h>
#include <pthread.h>
#include <sched.h>
#endif
#if defined(KILN_WITH_OPENMP)
#include <omp.h>
#endif
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
  Napi::Value cores = object.Get("cpuAffinity");
  if (!napi::IsAbsent(cores)) {
    napi::Check(cores.IsArray(), napi::code::kInvalidConfig,
                "cpuAffinity must be an array of CPU numbers");
    Napi::Array list = cores.As<Napi::Array>();
    for (uint32_t i = 0; i < list.Length(); ++i) {
      Napi::Value core = list.Get(i);
      napi::Check(core.IsNumber(), napi::code::kInvalidConfig,
                  "cpuAffinity must be an array of CPU numbers");
      const double value = core.As<Napi::Number>().DoubleValue();
      napi::Check(value >= 0 && value < 65536 && value == static_cast<int>(value),
                  napi::code::kInvalidConfig,
                  "cpuAffinity holds an invalid CPU number " + std::to_string(value));
      settings.cpu_affinity.push_back(static_cast<int>(value));
    }
  }
  return settings;
}

namespace {

#if defined(__linux__)
bool PinCallingThread(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int core : cores) {
    if (core < CPU_SETSIZE) CPU_SET(core, &set);
  }
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

std::vector<int> CallingThreadAffinity() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return cores;
  for (int core = 0; core < CPU_SETSIZE; ++core) {
    if (CPU_ISSET(core, &set)) cores.push_back(core);
  }
  return cores;
}

// Whether exactly one OpenMP runtime is loaded: a team this addon starts is then LibTorch's
// own (its threads are kept per calling thread and reused by the next forward).
bool OneOpenMpRuntime() {
  static const bool one = [] {
    int runtimes = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* count) {
          const std::string name = info->dlpi_name ? info->dlpi_name : "";
          for (const char* runtime : {"libgomp", "libiomp", "libomp."}) {
            if (name.find(runtime) != std::string::npos) ++*static_cast<int*>(count);
          }
          return 0;
        },
        &runtimes);
    return runtimes == 1;
  }();
  return one;
}

// Pins the forward's thread to the whole set, then each thread of its intra-op team (the
// forward's thread is thread 0) to one core of it, as TorchServe's launcher does with
// KMP_AFFINITY / GOMP_CPU_AFFINITY. A team's threads live as long as the thread that started
// them, so this runs once per thread, set and team size. Where the team cannot be reached
// (no OpenMP here, or LibTorch brings its own runtime), its threads inherit the whole set.
void PinForwardThreads(const std::vector<int>& cores) {
  thread_local std::vector<int> pinned;
  thread_local int pinned_team = 0;
  const int team = at::get_num_threads();
  if (pinned == cores && pinned_team == team) return;
  napi::Check(PinCallingThread(cores), napi::code::kInvalidConfig,
              "cannot pin the forward's thread to the cores asked for (not allowed here)");
#if defined(KILN_WITH_OPENMP)
  if (OneOpenMpRuntime()) {
#pragma omp parallel num_threads(team)
    PinCallingThread({cores[static_cast<size_t>(omp_get_thread_num()) % cores.size()]});
  }
#endif
  pinned = cores;
  pinned_team = team;
}
#endif

}  // namespace

void ApplyOnThisThread(const ForwardSettings& settings) {
  torch::jit::setGraphExecutorOptimize(settings.graph_optimizer);
  if (settings.num_threads > 0) SetIntraOpThreads(settings.num_threads);
  ApplyBackendFlags(settings.backend);
#if defined(__linux__)
  if (!settings.cpu_affinity.empty()) PinForwardThreads(settings.cpu_affinity);
#endif
}

ObservedSettings ObserveThisThread() {
  static std::atomic<int64_t> next_thread{1};
  thread_local const int64_t thread = next_thread++;
#if defined(__linux__)
  std::vector<int> affinity = CallingThreadAffinity();
#else
  std::vector<int> affinity;
#endif
  return {torch::jit::getGraphExecutorOptimize(), at::get_num_threads(), ReadBackendState(),
          thread, std::move(affinity)};
}

}  // namespace kiln::torch_addon
