// The long operations of ModuleWrap, each a PromiseWorker: arguments are copied into members
// on the JavaScript thread, Run() works on a pool thread without N-API, Result() converts.
#pragma once

#include <napi.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "forward_settings.h"
#include "forward_thread.h"
#include "kiln/napi/promise_worker.h"
#include "loaded_module.h"
#include "op_recorder.h"

namespace kiln::torch_addon {

struct LoadRequest {
  std::string path;
  c10::Device device{c10::kCPU};
  // Deserialize tensors straight onto `device` (DJL's mapLocation); otherwise load them where
  // they were saved, then move the module.
  bool map_location = true;
  std::vector<std::string> extra_files;
  bool optimize_for_inference = false;
};

class LoadWorker : public napi::PromiseWorker {
 public:
  LoadWorker(Napi::Env env, LoadRequest request);

 private:
  void Run() override;
  void Load();
  Napi::Value Result(Napi::Env env) override;

  LoadRequest request_;
  std::shared_ptr<LoadedModule> module_;
  // Only the requested files the archive holds.
  std::vector<std::pair<std::string, std::string>> extra_files_;
};

// Runs one forward: on `thread` when given (an execution context's own thread), else on a
// thread of its own for this forward (RunOnPassingThread).
class ForwardWorker : public napi::PromiseWorker {
 public:
  ForwardWorker(Napi::Env env, const Napi::Object& owner, std::shared_ptr<LoadedModule> module,
                std::shared_ptr<ForwardThread> thread, std::vector<c10::IValue> inputs,
                ForwardSettings settings);

 private:
  void Run() override;
  void RunHere();
  Napi::Value Result(Napi::Env env) override;

  std::shared_ptr<LoadedModule> module_;
  std::shared_ptr<ForwardThread> thread_;
  std::vector<c10::IValue> inputs_;
  ForwardSettings settings_;
  c10::IValue output_;
  ObservedSettings observed_{};
  std::vector<OpRecord> ops_;
  std::string graph_;
  // Steady-clock microseconds around the forward: how concurrent forwards are seen to overlap.
  double started_us_ = 0;
  double finished_us_ = 0;
};

class SaveWorker : public napi::PromiseWorker {
 public:
  SaveWorker(Napi::Env env, const Napi::Object& owner, std::shared_ptr<LoadedModule> module,
             std::string path, std::unordered_map<std::string, std::string> extra_files);

 private:
  void Run() override;
  Napi::Value Result(Napi::Env env) override;

  std::shared_ptr<LoadedModule> module_;
  std::string path_;
  std::unordered_map<std::string, std::string> extra_files_;
};

}  // namespace kiln::torch_addon
