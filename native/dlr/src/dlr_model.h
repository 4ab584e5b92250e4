// One DLR model handle (plain C++, no N-API). DLR's runtime is not thread-safe, so a handle is
// used by one thread at a time: callers take the lease on the JavaScript thread before queuing
// work, and the work releases it when its last DLR call returns.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlr_library.h"

namespace kiln::dlr_addon {

struct TensorInfo {
  std::string name;
  std::string type;
  size_t width = 0;
  std::vector<int64_t> shape;  // -1 for a dynamic dimension
};

struct ModelMetadata {
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  // Whether DLR knew the output names (it reads them from an optional metadata file).
  bool output_names_known = false;
  std::string backend;
};

struct CreateRequest {
  std::string model_path;
  int device_type = 1;  // DLPack kDLCPU
  int device_id = 0;
  int num_threads = 0;  // 0: leave DLR's default
};

struct InputTensor {
  size_t index = 0;  // into ModelMetadata::inputs
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

struct OutputTensor {
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

class DlrModel {
 public:
  // Off the JavaScript thread. Creates the handle, applies the thread count and reads the
  // inputs and outputs. Throws NativeError with DLR's message.
  static std::shared_ptr<DlrModel> Create(std::shared_ptr<const DlrLibrary> library,
                                          const CreateRequest& request);
  ~DlrModel();
  DlrModel(const DlrModel&) = delete;
  DlrModel& operator=(const DlrModel&) = delete;

  // Immutable after Create: safe to read from any thread.
  const ModelMetadata& metadata() const { return metadata_; }
  const DlrLibrary& library() const { return *library_; }

  // The lease: TryAcquire on the JavaScript thread, Release when the work is done.
  bool TryAcquire() { return !busy_.exchange(true); }
  void Release() { busy_.store(false); }
  bool busy() const { return busy_.load(); }

  // Off the JavaScript thread, holding the lease.
  std::vector<OutputTensor> Run(const std::vector<InputTensor>& inputs);
  // Off the JavaScript thread, holding the lease. The handle is gone afterwards even when DLR
  // reports an error, which is rethrown.
  void Delete();
  bool deleted() const { return deleted_.load(); }

 private:
  DlrModel(std::shared_ptr<const DlrLibrary> library, DLRModelHandle handle);
  void ReadMetadata();
  TensorInfo ReadInput(int index);
  TensorInfo ReadOutput(int index);
  std::vector<int64_t> OutputShape(int index, int64_t* size);

  std::shared_ptr<const DlrLibrary> library_;
  const DlrApi& api_;
  DLRModelHandle handle_;
  ModelMetadata metadata_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> deleted_{false};
};

}  // namespace kiln::dlr_addon
