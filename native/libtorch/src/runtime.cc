#include "runtime.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#if defined(KILN_WITH_OPENMP)
#include <omp.h>
#endif

#include "kiln/napi/errors.h"

namespace kiln::torch_addon {

void ApplyBackendFlags(const BackendFlags& flags) {
  at::Context& context = at::globalContext();
  if (flags.mkldnn && context.userEnabledMkldnn() != *flags.mkldnn) {
    context.setUserEnabledMkldnn(*flags.mkldnn);
  }
  if (flags.cudnn && context.userEnabledCuDNN() != *flags.cudnn) {
    context.setUserEnabledCuDNN(*flags.cudnn);
  }
  if (flags.cudnn_benchmark && context.benchmarkCuDNN() != *flags.cudnn_benchmark) {
    context.setBenchmarkCuDNN(*flags.cudnn_benchmark);
  }
}

BackendState ReadBackendState() {
  at::Context& context = at::globalContext();
  return {context.userEnabledMkldnn(), context.userEnabledCuDNN(), context.benchmarkCuDNN()};
}

void SetIntraOpThreads(int64_t threads) {
  napi::Check(threads > 0 && threads <= 4096, napi::code::kInvalidConfig,
              "num_threads must be between 1 and 4096, not " + std::to_string(threads));
  if (at::get_num_threads() != threads) at::set_num_threads(static_cast<int>(threads));
}

void RunOperatorsOnThisThreadAlone() {
#if defined(KILN_WITH_OPENMP)
  // OpenMP's thread count is per thread: LibTorch's parallel_for reads it (at::get_num_threads)
  // and runs inline at 1. at::set_num_threads would also change the process-wide default.
  // LibTorch sets a thread's count itself the first time it asks for it, so it asks first.
  thread_local const bool alone = (at::get_num_threads(), omp_set_num_threads(1), true);
  (void)alone;
#endif
}

void SetInterOpThreads(int64_t threads) {
  napi::Check(threads > 0 && threads <= 4096, napi::code::kInvalidConfig,
              "num_interop_threads must be between 1 and 4096, not " + std::to_string(threads));
  try {
    at::set_num_interop_threads(static_cast<int>(threads));
  } catch (const c10::Error&) {
    const int current = at::get_num_interop_threads();
    napi::Check(current == threads, napi::code::kInvalidConfig,
                "num_interop_threads=" + std::to_string(threads) +
                    " cannot be applied: LibTorch fixes the inter-op pool once per process and "
                    "it already has " +
                    std::to_string(current) +
                    " threads (set it on the engine, before any model loads)");
  }
}

c10::Device ParseDevice(const std::string& name) {
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(name);
  } catch (const c10::Error&) {
    throw napi::NativeError(napi::code::kInvalidConfig,
                            "unknown device \"" + name + "\" (use cpu, cuda or cuda:N)");
  }
  if (device.is_cpu()) return device;
  napi::Check(device.is_cuda(), napi::code::kInvalidConfig,
              "device \"" + name + "\" is not supported by Kiln's LibTorch engine (cpu, cuda)");
  napi::Check(CompiledWithCuda() && torch::cuda::is_available(), napi::code::kInvalidConfig,
              "device \"" + name +
                  "\" needs a CUDA build of LibTorch and a visible GPU; this addon was built " +
                  (CompiledWithCuda() ? "with CUDA but no GPU is visible"
                                      : "against a CPU-only LibTorch"));
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  napi::Check(!device.has_index() || device.index() < count, napi::code::kInvalidConfig,
              "device \"" + name + "\" does not exist (" + std::to_string(count) + " GPUs)");
  return device;
}

bool CompiledWithCuda() {
#if defined(KILN_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

}  // namespace kiln::torch_addon
