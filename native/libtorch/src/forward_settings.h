// Per-forward settings and how they are put in force on the thread that runs the forward.
//
// LibTorch keeps the graph-executor optimizer switch and the OpenMP team size per thread, and
// forwards run on an execution context's thread or a thread of their own, so both are applied
// before every forward rather than once. The backend toggles are process-wide; applying them
// per forward gives each model its own setting as long as models with different settings do
// not overlap.
#pragma once

#include <napi.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime.h"

namespace kiln::torch_addon {

struct ForwardSettings {
  bool graph_optimizer = true;
  // 0 leaves the thread's intra-op team as it is.
  int64_t num_threads = 0;
  BackendFlags backend;
  // Tensors stay native (TensorWrap, on the model's device) instead of being copied to
  // JavaScript.
  bool native_outputs = false;
  // Record every operator with its time (OpRecorder).
  bool record_ops = false;
  // Return the graph the executor ran (torch::jit::lastExecutedOptimizedGraph).
  bool capture_graph = false;
  // Core pinning: the forward's thread and its intra-op (OpenMP) threads run on these logical
  // CPUs, thread i on cpu_affinity[i % size]; empty leaves them where they are.
  std::vector<int> cpu_affinity;

  // JavaScript thread. Reads `{ graphOptimizer, numThreads, mkldnn, cudnn, cudnnBenchmark,
  // nativeOutputs, recordOps, captureGraph, cpuAffinity }`; absent fields keep their defaults.
  static ForwardSettings FromJs(const Napi::Value& options);
};

// What was in force on the forward's thread, read back after it ran.
struct ObservedSettings {
  bool graph_optimizer;
  int64_t num_threads;
  BackendState backend;
  // A small number naming the thread (1, 2, … in order of first use).
  int64_t thread;
  // The logical CPUs the forward's thread may run on (Linux; empty elsewhere).
  std::vector<int> affinity;
};

// Pool thread: puts `settings` in force for the calling thread.
void ApplyOnThisThread(const ForwardSettings& settings);
ObservedSettings ObserveThisThread();

}  // namespace kiln::torch_addon
