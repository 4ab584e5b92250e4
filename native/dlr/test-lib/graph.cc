#include "graph.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>

#include "mini_json.h"
#include "tvm_params.h"

namespace kiln_conformance {

namespace fs = std::filesystem;

namespace {

// Graph files are small; a larger one is corrupt or not ours.
constexpr uintmax_t kMaxGraphBytes = 1 << 20;

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// JSON files DLR skips when it looks for the graph (SageMaker's side files and versions).
bool IsAuxiliaryJson(const std::string& file) {
  const std::string base = fs::path(file).filename().string();
  return base == "model-shapes.json" || base == "hyperparams.json" || base == "version.json";
}

std::string PickOne(const std::vector<std::string>& files, const std::string& kind) {
  if (files.size() == 1) return files[0];
  if (files.empty()) throw std::runtime_error("no " + kind + " found in the model path");
  std::string list;
  for (const std::string& f : files) list += (list.empty() ? "" : ", ") + f;
  throw std::runtime_error("several " + kind + " files in the model path: " + list);
}

std::string ReadText(const std::string& path) {
  std::error_code error;
  uintmax_t size = fs::file_size(path, error);
  if (error) throw std::runtime_error("cannot read " + path + ": " + error.message());
  if (size > kMaxGraphBytes) throw std::runtime_error(path + " is too large for a graph file");
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

TensorSpec ReadSpec(const JsonValue& json, const std::string& what) {
  TensorSpec spec;
  spec.name = json.At("name").AsString(what + ".name");
  spec.dtype = json.At("dtype").AsString(what + ".dtype");
  spec.width = DTypeWidth(spec.dtype);
  for (const JsonValue& dim : json.At("shape").AsArray(what + ".shape")) {
    int64_t value = dim.AsInt(what + ".shape[]");
    if (value < -1) throw std::runtime_error(what + " has an invalid dimension");
    spec.shape.push_back(value);
  }
  return spec;
}

std::vector<TensorSpec> ReadSpecs(const JsonValue& json, const char* key) {
  std::vector<TensorSpec> specs;
  for (const JsonValue& item : json.At(key).AsArray(key)) {
    specs.push_back(ReadSpec(item, std::string(key) + "[" + std::to_string(specs.size()) + "]"));
  }
  return specs;
}

void ReadFaults(const JsonValue& json, const char* key, std::map<std::string, std::string>& faults) {
  if (!json.Has(key)) return;
  const JsonValue& entries = json.At(key);
  if (entries.kind != JsonValue::Kind::kObject) throw std::runtime_error(std::string(key) + " must be an object");
  for (const auto& [name, message] : entries.object) faults[name] = message.AsString(std::string(key) + "." + name);
}

Op ReadOp(const std::string& name) {
  if (name == "identity") return Op::kIdentity;
  if (name == "add_mul") return Op::kAddMul;
  if (name == "affine") return Op::kAffine;
  if (name == "stats") return Op::kStats;
  throw std::runtime_error("unknown op '" + name + "'");
}

bool IsFloat32Matrix(const TensorSpec& spec) {
  return spec.dtype == "float32" && spec.shape.size() == 2 && spec.shape[1] > 0;
}

std::vector<float> Float32Param(const std::map<std::string, ParamArray>& params,
                                const std::string& name, const std::vector<int64_t>& shape) {
  auto found = params.find(name);
  if (found == params.end()) throw std::runtime_error("the params file has no '" + name + "'");
  const ParamArray& array = found->second;
  if (array.code != 2 || array.bits != 32 || array.lanes != 1 || array.shape != shape) {
    throw std::runtime_error("param '" + name + "' has the wrong type or shape");
  }
  std::vector<float> values(array.data.size() / sizeof(float));
  std::memcpy(values.data(), array.data.data(), array.data.size());
  return values;
}

// Checks that the graph's inputs and outputs suit its op, and reads the op's weights.
void Validate(Graph& graph, const std::map<std::string, ParamArray>& params) {
  const auto& in = graph.inputs;
  const auto& out = graph.outputs;
  switch (graph.op) {
    case Op::kIdentity:
      if (in.size() != 1 || out.size() != 1 || in[0].dtype != out[0].dtype ||
          in[0].shape.size() != out[0].shape.size()) {
        throw std::runtime_error("identity needs one input and one output of the same type and rank");
      }
      return;
    case Op::kAddMul:
      if (in.size() != 2 || out.size() != 2 || !IsFloat32Matrix(in[0]) || in[0].shape != in[1].shape ||
          in[1].dtype != "float32" || out[0].dtype != "float32" || out[1].dtype != "float32") {
        throw std::runtime_error("add_mul needs two float32 [-1, n] inputs and two float32 outputs");
      }
      return;
    case Op::kAffine: {
      if (in.size() != 1 || out.size() != 1 || !IsFloat32Matrix(in[0]) || !IsFloat32Matrix(out[0])) {
        throw std::runtime_error("affine needs one float32 [-1, k] input and one float32 [-1, n] output");
      }
      const int64_t k = in[0].shape[1];
      const int64_t n = out[0].shape[1];
      graph.weight = Float32Param(params, "weight", {k, n});
      graph.bias = Float32Param(params, "bias", {n});
      return;
    }
    case Op::kStats:
      if (!in.empty() || out.size() != 1 || out[0].dtype != "int64" || out[0].shape != std::vector<int64_t>{6}) {
        throw std::runtime_error("stats needs no inputs and one int64 [6] output");
      }
      return;
  }
}

template <typename T>
const T* As(const HostTensor& tensor) {
  return reinterpret_cast<const T*>(tensor.bytes.data());
}

HostTensor Float32Tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  HostTensor tensor;
  tensor.shape = std::move(shape);
  tensor.bytes.resize(values.size() * sizeof(float));
  std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  return tensor;
}

}  // namespace

size_t DTypeWidth(const std::string& dtype) {
  if (dtype == "bool" || dtype == "int8" || dtype == "uint8") return 1;
  if (dtype == "int16" || dtype == "uint16" || dtype == "float16" || dtype == "bfloat16") return 2;
  if (dtype == "int32" || dtype == "uint32" || dtype == "float32") return 4;
  if (dtype == "int64" || dtype == "uint64" || dtype == "float64") return 8;
  throw std::runtime_error("unsupported dtype '" + dtype + "'");
}

ModelFiles FindModelFiles(const std::string& model_path) {
  std::vector<std::string> files;
  size_t start = 0;
  while (start <= model_path.size()) {
    size_t end = model_path.find(':', start);
    if (end == std::string::npos) end = model_path.size();
    const std::string part = model_path.substr(start, end - start);
    start = end + 1;
    if (part.empty()) continue;
    std::error_code error;
    if (fs::is_directory(part, error)) {
      for (const auto& entry : fs::directory_iterator(part, error)) {
        if (entry.is_regular_file(error)) files.push_back(entry.path().string());
      }
    } else if (fs::is_regular_file(part, error)) {
      files.push_back(part);
    } else {
      throw std::runtime_error("model path '" + part + "' does not exist");
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> graphs, libraries, params;
  for (const std::string& file : files) {
    if (EndsWith(file, ".json") && !IsAuxiliaryJson(file)) graphs.push_back(file);
    if (EndsWith(file, ".so")) libraries.push_back(file);
    if (EndsWith(file, ".params")) params.push_back(file);
  }
  return {PickOne(graphs, "graph .json"), PickOne(libraries, "compiled .so"), PickOne(params, ".params")};
}

Graph LoadGraph(const ModelFiles& files) {
  // Like DLR, an empty library file is accepted (a graph with no compiled kernels); anything
  // else must at least be a shared object. Kernels here are built in, so it is not loaded.
  std::ifstream library(files.library, std::ios::binary);
  char magic[4] = {0, 0, 0, 0};
  library.read(magic, 4);
  if (library.gcount() != 0 && std::memcmp(magic, "\x7f" "ELF", 4) != 0) {
    throw std::runtime_error(files.library + " is not a compiled shared library");
  }
  const JsonValue json = ParseJson(ReadText(files.graph_json));
  if (!json.Has("kiln_conformance_graph") ||
      json.At("kiln_conformance_graph").AsInt("kiln_conformance_graph") != 1) {
    throw std::runtime_error(files.graph_json + " is not a conformance graph (version 1)");
  }
  Graph graph;
  graph.op = ReadOp(json.At("op").AsString("op"));
  if (json.Has("device_type")) graph.device_type = static_cast<int>(json.At("device_type").AsInt("device_type"));
  if (json.Has("has_metadata")) graph.has_metadata = json.At("has_metadata").AsBool("has_metadata");
  if (json.Has("run_delay_ms")) {
    int64_t delay = json.At("run_delay_ms").AsInt("run_delay_ms");
    if (delay < 0 || delay > 10000) throw std::runtime_error("run_delay_ms must be within 0..10000");
    graph.run_delay_ms = static_cast<int>(delay);
  }
  ReadFaults(json, "faults", graph.faults);
  ReadFaults(json, "run_faults", graph.run_faults);
  graph.inputs = ReadSpecs(json, "inputs");
  graph.outputs = ReadSpecs(json, "outputs");
  Validate(graph, ReadTvmParams(files.params));
  return graph;
}

std::vector<HostTensor> Compute(const Graph& graph, const std::vector<HostTensor>& inputs) {
  switch (graph.op) {
    case Op::kIdentity:
      return {inputs[0]};
    case Op::kAddMul: {
      const HostTensor& a = inputs[0];
      const HostTensor& b = inputs[1];
      if (a.shape != b.shape) throw std::runtime_error("add_mul: inputs a and b differ in shape");
      const size_t n = a.bytes.size() / sizeof(float);
      std::vector<float> sum(n), product(n);
      for (size_t i = 0; i < n; ++i) {
        sum[i] = As<float>(a)[i] + As<float>(b)[i];
        product[i] = As<float>(a)[i] * As<float>(b)[i];
      }
      return {Float32Tensor(a.shape, sum), Float32Tensor(a.shape, product)};
    }
    case Op::kAffine: {
      const HostTensor& x = inputs[0];
      const int64_t rows = x.shape[0];
      const int64_t k = x.shape[1];
      const int64_t n = static_cast<int64_t>(graph.bias.size());
      std::vector<float> y(static_cast<size_t>(rows * n));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          float acc = graph.bias[c];
          for (int64_t j = 0; j < k; ++j) acc += As<float>(x)[r * k + j] * graph.weight[j * n + c];
          y[r * n + c] = acc;
        }
      }
      return {Float32Tensor({rows, n}, y)};
    }
    case Op::kStats:
      break;
  }
  throw std::runtime_error("the stats op is computed by the C API layer");
}

}  // namespace kiln_conformance
