// The conformance models: a graph file (JSON) naming one small computation and its inputs and
// outputs, a TVM params file with its weights, and a compiled-library file. They stand in for
// a TVM-compiled model folder; the computation runs here, in plain C++.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln_conformance {

struct TensorSpec {
  std::string name;
  std::string dtype;  // TVM's spelling: float32, int64, uint8, bool…
  size_t width = 0;   // bytes per element
  std::vector<int64_t> shape;  // -1 for a dynamic dimension
};

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

enum class Op { kIdentity, kAddMul, kAffine, kStats };

struct Graph {
  Op op = Op::kIdentity;
  int device_type = 1;  // DLPack's kDLCPU
  // Whether output names are known (DLR reads them from a metadata file that may be absent).
  bool has_metadata = true;
  // Time RunDLRModel takes, so tests can hold a handle busy and overlap runs.
  int run_delay_ms = 0;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  // C API function name -> message: that call fails with the message (error-path tests).
  std::map<std::string, std::string> faults;
  // The same, but only once the model has run (for calls DLR also makes while loading).
  std::map<std::string, std::string> run_faults;
  std::vector<float> weight;  // affine: [K, N], row-major
  std::vector<float> bias;    // affine: [N]
};

struct ModelFiles {
  std::string graph_json;
  std::string library;
  std::string params;
};

// DLR's model path: folders or files separated by ':'. Throws std::runtime_error.
ModelFiles FindModelFiles(const std::string& model_path);
Graph LoadGraph(const ModelFiles& files);
// Bytes per element of a TVM dtype; throws for types the conformance models do not know.
size_t DTypeWidth(const std::string& dtype);
// Runs identity, add_mul or affine on inputs given in declaration order.
std::vector<HostTensor> Compute(const Graph& graph, const std::vector<HostTensor>& inputs);

}  // namespace kiln_conformance
