// Process-wide LibTorch state: what this build has, the global toggles (oneDNN, cuDNN), thread
// pools and devices.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::torch_addon {

// Global backend toggles. Unset fields are left alone.
struct BackendFlags {
  std::optional<bool> mkldnn;
  std::optional<bool> cudnn;
  std::optional<bool> cudnn_benchmark;
};

// The toggles as they are now.
struct BackendState {
  bool mkldnn;
  bool cudnn;
  bool cudnn_benchmark;
};

// Sets the given toggles. They are process-wide in LibTorch (at::globalContext()).
void ApplyBackendFlags(const BackendFlags& flags);
BackendState ReadBackendState();

// Intra-op threads of the calling thread's OpenMP team (and the default for threads that
// have not run LibTorch yet). No-op when `threads` is already in force.
void SetIntraOpThreads(int64_t threads);

// Runs the calling thread's operators on it alone, without an OpenMP team of its own. For the
// tensor operations and copies that run on libuv's threads, which live as long as the process:
// a team started there would live as long and slow every forward (see RunOnPassingThread).
// Requests already run such operations side by side, one per libuv thread.
void RunOperatorsOnThisThreadAlone();

// Inter-op pool size. LibTorch fixes it once: asking again for the size in force succeeds,
// asking for another throws INVALID_CONFIG explaining why.
void SetInterOpThreads(int64_t threads);

// "cpu", "cuda", "cuda:1". Throws INVALID_CONFIG for devices this build or machine lacks.
c10::Device ParseDevice(const std::string& name);

// Whether this addon was compiled against a CUDA build of LibTorch.
bool CompiledWithCuda();

}  // namespace kiln::torch_addon
