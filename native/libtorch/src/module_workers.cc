#include "module_workers.h"

#include <caffe2/serialize/inline_container.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include "device_copies.h"
#include "device_stream.h"
#include "module_wrap.h"
#include "values.h"

namespace kiln::torch_addon {
namespace {

double SteadyMicros() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

LoadWorker::LoadWorker(Napi::Env env, LoadRequest request)
    : PromiseWorker(env, "kiln.libtorch.load"), request_(std::move(request)) {}

void LoadWorker::Run() {
  RunOnPassingThread([this] { Load(); });
}

void LoadWorker::Load() {
  try {
    torch::jit::ExtraFilesMap extra;
    for (const std::string& name : request_.extra_files) extra[name] = "";
    auto loaded = std::make_shared<LoadedModule>();
    loaded->origin = request_.path;
    loaded->device = request_.device;
    if (request_.map_location) {
      loaded->module = torch::jit::load(request_.path, request_.device, extra);
    } else {
      loaded->module = torch::jit::load(request_.path, c10::nullopt, extra);
      loaded->module.to(request_.device);
    }
    loaded->module.eval();
    if (request_.optimize_for_inference) {
      loaded->module = torch::jit::optimize_for_inference(loaded->module);
      loaded->optimized_for_inference = true;
    }
    // LibTorch reads a missing extra file as an empty one; the archive's index tells them apart.
    if (!request_.extra_files.empty()) {
      caffe2::serialize::PyTorchStreamReader reader(request_.path);
      for (const std::string& name : request_.extra_files) {
        if (reader.hasRecord("extra/" + name)) extra_files_.emplace_back(name, extra[name]);
      }
    }
    module_ = std::move(loaded);
  } catch (...) {
    napi::ErrorInfo info = napi::DescribeCurrentException();
    throw napi::NativeError(napi::code::kModelLoadFailed,
                            "cannot load TorchScript module " + request_.path + ": " + info.message);
  }
}

Napi::Value LoadWorker::Result(Napi::Env env) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("module", ModuleWrap::NewInstance(env, module_));
  Napi::Object files = Napi::Object::New(env);
  for (const auto& [name, content] : extra_files_) files.Set(name, Napi::String::New(env, content));
  result.Set("extraFiles", files);
  return result;
}

ForwardWorker::ForwardWorker(Napi::Env env, const Napi::Object& owner,
                             std::shared_ptr<LoadedModule> module,
                             std::shared_ptr<ForwardThread> thread, std::vector<c10::IValue> inputs,
                             ForwardSettings settings)
    : PromiseWorker(env, "kiln.libtorch.forward", owner),
      module_(std::move(module)),
      thread_(std::move(thread)),
      inputs_(std::move(inputs)),
      settings_(settings) {}

void ForwardWorker::Run() {
  if (thread_) {
    thread_->Call([this] { RunHere(); });
  } else {
    RunOnPassingThread([this] { RunHere(); });
  }
}

void ForwardWorker::RunHere() {
  started_us_ = SteadyMicros();
  ApplyOnThisThread(settings_);
  const c10::Device device = module_->device;
  DeviceStreamScope stream(device);
  OpRecorder recorder(settings_.record_ops);
  {
    c10::InferenceMode inference;
    if (!device.is_cpu()) {
      for (c10::IValue& input : inputs_) {
        input = MapTensors(input, [&](const at::Tensor& t) { return UploadAsync(t, device); });
      }
    }
    c10::IValue output = module_->module.forward(std::move(inputs_));
    inputs_.clear();
    if (settings_.capture_graph) {
      std::shared_ptr<torch::jit::Graph> graph = torch::jit::lastExecutedOptimizedGraph();
      graph_ = graph ? graph->toString() : "";
    }
    output_ = settings_.native_outputs ? std::move(output) : MapTensors(output, DownloadAsync);
  }
  stream.Synchronize();
  observed_ = ObserveThisThread();
  ops_ = recorder.Take();
  finished_us_ = SteadyMicros();
}

Napi::Value ForwardWorker::Result(Napi::Env env) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("value", ValueToJs(env, output_, settings_.native_outputs));
  output_ = c10::IValue();
  Napi::Object observed = Napi::Object::New(env);
  observed.Set("graphOptimizer", observed_.graph_optimizer);
  observed.Set("numThreads", Napi::Number::New(env, static_cast<double>(observed_.num_threads)));
  observed.Set("mkldnn", observed_.backend.mkldnn);
  observed.Set("cudnn", observed_.backend.cudnn);
  observed.Set("cudnnBenchmark", observed_.backend.cudnn_benchmark);
  observed.Set("thread", Napi::Number::New(env, static_cast<double>(observed_.thread)));
  Napi::Array affinity = Napi::Array::New(env, observed_.affinity.size());
  for (size_t i = 0; i < observed_.affinity.size(); ++i) {
    affinity.Set(static_cast<uint32_t>(i), Napi::Number::New(env, observed_.affinity[i]));
  }
  observed.Set("cpuAffinity", affinity);
  result.Set("observed", observed);
  result.Set("startedUs", started_us_);
  result.Set("finishedUs", finished_us_);
  if (settings_.record_ops) {
    Napi::Array ops = Napi::Array::New(env, ops_.size());
    for (size_t i = 0; i < ops_.size(); ++i) {
      Napi::Object op = Napi::Object::New(env);
      op.Set("name", ops_[i].name);
      op.Set("depth", Napi::Number::New(env, ops_[i].depth));
      op.Set("micros", Napi::Number::New(env, ops_[i].micros));
      ops.Set(static_cast<uint32_t>(i), op);
    }
    result.Set("ops", ops);
  }
  if (settings_.capture_graph) result.Set("graph", graph_);
  return result;
}

SaveWorker::SaveWorker(Napi::Env env, const Napi::Object& owner,
                       std::shared_ptr<LoadedModule> module, std::string path,
                       std::unordered_map<std::string, std::string> extra_files)
    : PromiseWorker(env, "kiln.libtorch.save", owner),
      module_(std::move(module)),
      path_(std::move(path)),
      extra_files_(std::move(extra_files)) {}

void SaveWorker::Run() { module_->module.save(path_, extra_files_); }

Napi::Value SaveWorker::Result(Napi::Env env) { return env.Undefined(); }

}  // namespace kiln::torch_addon
