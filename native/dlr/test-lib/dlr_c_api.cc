// A conformance implementation of DLR's C API (dlr.h, DLR 1.5 and later) over the small graphs
// of graph.h. It behaves like DLR where a binding can tell: status codes with a thread-local
// last error, names and types as C strings owned by the model, -1 for dynamic dimensions,
// shapes known after a run. And it checks what DLR cannot: a handle used from two threads at
// once fails with an error and is counted, and a `stats` model reports the counters.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "graph.h"

#define KILN_DLR_API extern "C" __attribute__((visibility("default")))

typedef void* DLRModelHandle;

using kiln_conformance::Graph;
using kiln_conformance::HostTensor;
using kiln_conformance::TensorSpec;

namespace {

// TVM keeps the last error per thread, and so does DLR: a binding must read it on the
// thread whose call failed.
thread_local std::string last_error;

std::atomic<int64_t> concurrent_uses{0};
std::atomic<int64_t> live_models{0};
std::atomic<int64_t> created_models{0};
std::atomic<int64_t> deleted_models{0};

struct Model {
  Graph graph;
  std::atomic<bool> in_use{false};
  int num_threads = 0;
  int64_t env_threads_at_create = -1;
  std::vector<std::optional<HostTensor>> inputs;
  std::vector<HostTensor> outputs;
  bool ran = false;
};

int Fail(const std::string& message) {
  last_error = message;
  return -1;
}

void CheckFault(const std::map<std::string, std::string>& faults, const char* function) {
  auto fault = faults.find(function);
  if (fault != faults.end()) throw std::runtime_error(fault->second);
}

// Runs `body` with the handle held exclusively. A second thread arriving meanwhile fails.
template <typename Body>
int WithModel(DLRModelHandle* handle, const char* function, Body body) {
  if (handle == nullptr || *handle == nullptr) {
    return Fail(std::string(function) + ": model is nullptr, create it first");
  }
  Model* model = static_cast<Model*>(*handle);
  if (model->in_use.exchange(true)) {
    concurrent_uses.fetch_add(1);
    return Fail(std::string(function) +
                ": the model handle is used from two threads at once (the DLR runtime is not thread-safe)");
  }
  int status = 0;
  try {
    CheckFault(model->graph.faults, function);
    if (model->ran) CheckFault(model->graph.run_faults, function);
    body(*model);
  } catch (const std::exception& e) {
    status = Fail(std::string(function) + ": " + e.what());
  }
  model->in_use.store(false);
  return status;
}

const TensorSpec& SpecAt(const std::vector<TensorSpec>& specs, int index, const char* what) {
  if (index < 0 || static_cast<size_t>(index) >= specs.size()) {
    throw std::runtime_error(std::string(what) + " index " + std::to_string(index) + " is out of range");
  }
  return specs[static_cast<size_t>(index)];
}

int64_t ElementCount(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return -1;
    count *= dim;
  }
  return count;
}

// Output `index`: its shape after the last run, else the declared one.
const std::vector<int64_t>& OutputShape(const Model& model, int index) {
  const TensorSpec& spec = SpecAt(model.graph.outputs, index, "output");
  return model.ran ? model.outputs[static_cast<size_t>(index)].shape : spec.shape;
}

HostTensor Stats(const Model& model) {
  const int64_t values[6] = {concurrent_uses.load(), live_models.load(), created_models.load(),
                             deleted_models.load(), model.num_threads, model.env_threads_at_create};
  HostTensor tensor;
  tensor.shape = {6};
  tensor.bytes.resize(sizeof(values));
  std::memcpy(tensor.bytes.data(), values, sizeof(values));
  return tensor;
}

int64_t EnvThreads() {
  const char* text = std::getenv("TVM_NUM_THREADS");
  return text == nullptr ? -1 : std::strtoll(text, nullptr, 10);
}

}  // namespace

KILN_DLR_API int CreateDLRModel(DLRModelHandle* handle, const char* model_path, int dev_type, int dev_id) {
  if (handle == nullptr || model_path == nullptr) return Fail("CreateDLRModel: null argument");
  try {
    Graph graph = kiln_conformance::LoadGraph(kiln_conformance::FindModelFiles(model_path));
    CheckFault(graph.faults, "CreateDLRModel");
    if (dev_type != graph.device_type || dev_id != 0) {
      throw std::runtime_error("the model was compiled for device type " + std::to_string(graph.device_type) +
                               " id 0, not device type " + std::to_string(dev_type) + " id " +
                               std::to_string(dev_id));
    }
    auto* model = new Model();
    model->graph = std::move(graph);
    model->inputs.resize(model->graph.inputs.size());
    model->env_threads_at_create = EnvThreads();
    *handle = model;
    live_models.fetch_add(1);
    created_models.fetch_add(1);
    return 0;
  } catch (const std::exception& e) {
    return Fail(std::string("CreateDLRModel: ") + e.what());
  }
}

KILN_DLR_API int DeleteDLRModel(DLRModelHandle* handle) {
  if (handle == nullptr || *handle == nullptr) return Fail("DeleteDLRModel: model is nullptr, create it first");
  Model* model = static_cast<Model*>(*handle);
  if (model->in_use.exchange(true)) {
    concurrent_uses.fetch_add(1);
    return Fail("DeleteDLRModel: the model handle is used from two threads at once (the DLR runtime is not thread-safe)");
  }
  // An injected fault is reported, but the model is gone all the same, as in DLR.
  auto fault = model->graph.faults.find("DeleteDLRModel");
  const std::string message = fault == model->graph.faults.end() ? "" : fault->second;
  delete model;
  *handle = nullptr;
  live_models.fetch_sub(1);
  deleted_models.fetch_add(1);
  return message.empty() ? 0 : Fail("DeleteDLRModel: " + message);
}

KILN_DLR_API int RunDLRModel(DLRModelHandle* handle) {
  return WithModel(handle, "RunDLRModel", [](Model& model) {
    if (model.graph.run_delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(model.graph.run_delay_ms));
    }
    std::vector<HostTensor> inputs;
    for (size_t i = 0; i < model.inputs.size(); ++i) {
      if (!model.inputs[i]) throw std::runtime_error("input '" + model.graph.inputs[i].name + "' has not been set");
      inputs.push_back(*model.inputs[i]);
    }
    model.outputs = model.graph.op == kiln_conformance::Op::kStats
                        ? std::vector<HostTensor>{Stats(model)}
                        : kiln_conformance::Compute(model.graph, inputs);
    model.ran = true;
  });
}

KILN_DLR_API int GetDLRNumInputs(DLRModelHandle* handle, int* num_inputs) {
  return WithModel(handle, "GetDLRNumInputs",
                   [&](Model& model) { *num_inputs = static_cast<int>(model.graph.inputs.size()); });
}

KILN_DLR_API int GetDLRNumOutputs(DLRModelHandle* handle, int* num_outputs) {
  return WithModel(handle, "GetDLRNumOutputs",
                   [&](Model& model) { *num_outputs = static_cast<int>(model.graph.outputs.size()); });
}

KILN_DLR_API int GetDLRInputName(DLRModelHandle* handle, int index, const char** input_name) {
  return WithModel(handle, "GetDLRInputName", [&](Model& model) {
    *input_name = SpecAt(model.graph.inputs, index, "input").name.c_str();
  });
}

KILN_DLR_API int GetDLRInputType(DLRModelHandle* handle, int index, const char** input_type) {
  return WithModel(handle, "GetDLRInputType", [&](Model& model) {
    *input_type = SpecAt(model.graph.inputs, index, "input").dtype.c_str();
  });
}

KILN_DLR_API int GetDLRInputSizeDim(DLRModelHandle* handle, int index, int64_t* size, int* dim) {
  return WithModel(handle, "GetDLRInputSizeDim", [&](Model& model) {
    const TensorSpec& spec = SpecAt(model.graph.inputs, index, "input");
    *size = ElementCount(spec.shape);
    *dim = static_cast<int>(spec.shape.size());
  });
}

KILN_DLR_API int GetDLRInputShape(DLRModelHandle* handle, int index, int64_t* shape) {
  return WithModel(handle, "GetDLRInputShape", [&](Model& model) {
    const TensorSpec& spec = SpecAt(model.graph.inputs, index, "input");
    std::copy(spec.shape.begin(), spec.shape.end(), shape);
  });
}

KILN_DLR_API int SetDLRInput(DLRModelHandle* handle, const char* name, const int64_t* shape, const void* input,
                             int dim) {
  return WithModel(handle, "SetDLRInput", [&](Model& model) {
    const auto& specs = model.graph.inputs;
    size_t index = 0;
    while (index < specs.size() && specs[index].name != name) ++index;
    if (index == specs.size()) throw std::runtime_error(std::string("no input named '") + name + "'");
    const TensorSpec& spec = specs[index];
    if (dim != static_cast<int>(spec.shape.size())) {
      throw std::runtime_error("input '" + spec.name + "' has rank " + std::to_string(spec.shape.size()) +
                               ", got " + std::to_string(dim));
    }
    HostTensor tensor;
    for (int d = 0; d < dim; ++d) {
      if (shape[d] < 0 || (spec.shape[d] >= 0 && shape[d] != spec.shape[d])) {
        throw std::runtime_error("Mismatch found in input data size of '" + spec.name + "' at dimension " +
                                 std::to_string(d));
      }
      tensor.shape.push_back(shape[d]);
    }
    const size_t bytes = static_cast<size_t>(ElementCount(tensor.shape)) * spec.width;
    tensor.bytes.resize(bytes);
    if (bytes > 0) std::memcpy(tensor.bytes.data(), input, bytes);
    model.inputs[index] = std::move(tensor);
  });
}

KILN_DLR_API int GetDLROutputSizeDim(DLRModelHandle* handle, int index, int64_t* size, int* dim) {
  return WithModel(handle, "GetDLROutputSizeDim", [&](Model& model) {
    const std::vector<int64_t>& shape = OutputShape(model, index);
    *size = ElementCount(shape);
    *dim = static_cast<int>(shape.size());
  });
}

KILN_DLR_API int GetDLROutputShape(DLRModelHandle* handle, int index, int64_t* shape) {
  return WithModel(handle, "GetDLROutputShape", [&](Model& model) {
    const std::vector<int64_t>& actual = OutputShape(model, index);
    std::copy(actual.begin(), actual.end(), shape);
  });
}

KILN_DLR_API int GetDLROutputType(DLRModelHandle* handle, int index, const char** output_type) {
  return WithModel(handle, "GetDLROutputType", [&](Model& model) {
    *output_type = SpecAt(model.graph.outputs, index, "output").dtype.c_str();
  });
}

KILN_DLR_API int GetDLRHasMetadata(DLRModelHandle* handle, bool* has_metadata) {
  return WithModel(handle, "GetDLRHasMetadata", [&](Model& model) { *has_metadata = model.graph.has_metadata; });
}

KILN_DLR_API int GetDLROutputName(DLRModelHandle* handle, const int index, const char** name) {
  return WithModel(handle, "GetDLROutputName", [&](Model& model) {
    if (!model.graph.has_metadata) throw std::runtime_error("no metadata file: output names are unknown");
    *name = SpecAt(model.graph.outputs, index, "output").name.c_str();
  });
}

KILN_DLR_API int GetDLROutput(DLRModelHandle* handle, int index, void* out) {
  return WithModel(handle, "GetDLROutput", [&](Model& model) {
    SpecAt(model.graph.outputs, index, "output");
    if (!model.ran) throw std::runtime_error("the model has not run yet");
    const HostTensor& tensor = model.outputs[static_cast<size_t>(index)];
    if (!tensor.bytes.empty()) std::memcpy(out, tensor.bytes.data(), tensor.bytes.size());
  });
}

KILN_DLR_API int SetDLRNumThreads(DLRModelHandle* handle, int threads) {
  return WithModel(handle, "SetDLRNumThreads", [&](Model& model) {
    if (threads <= 0) throw std::runtime_error("threads must be positive");
    model.num_threads = threads;
  });
}

KILN_DLR_API int GetDLRBackend(DLRModelHandle* handle, const char** name) {
  return WithModel(handle, "GetDLRBackend", [&](Model&) { *name = "kiln-conformance"; });
}

KILN_DLR_API int GetDLRDeviceType(const char* model_path) {
  try {
    Graph graph = kiln_conformance::LoadGraph(kiln_conformance::FindModelFiles(model_path));
    CheckFault(graph.faults, "GetDLRDeviceType");
    return graph.device_type;
  } catch (const std::exception& e) {
    return Fail(std::string("GetDLRDeviceType: ") + e.what());
  }
}

KILN_DLR_API int GetDLRVersion(const char** out) {
  *out = "1.10.0-kiln-conformance";
  return 0;
}

KILN_DLR_API const char* DLRGetLastError() { return last_error.c_str(); }
