#include "dlr_model.h"

#include <limits>
#include <utility>

#include "element_types.h"
#include "kiln/napi/errors.h"

namespace kiln::dlr_addon {

namespace {

using napi::NativeError;
namespace codes = napi::code;

// Bounds on what DLR reports, so a broken library cannot make the addon allocate without limit.
constexpr int kMaxTensors = 4096;
constexpr int kMaxRank = 32;
constexpr uint64_t kMaxOutputBytes = uint64_t{1} << 36;

void CheckCount(int count, const char* what) {
  if (count < 0 || count > kMaxTensors) {
    throw NativeError(codes::kEngineError, std::string("DLR reported ") + std::to_string(count) + " " + what);
  }
}

void CheckRank(int rank, const std::string& what) {
  if (rank < 0 || rank > kMaxRank) {
    throw NativeError(codes::kEngineError, "DLR reported rank " + std::to_string(rank) + " for " + what);
  }
}

std::string Copy(const char* text) { return text == nullptr ? std::string() : std::string(text); }

}  // namespace

DlrModel::DlrModel(std::shared_ptr<const DlrLibrary> library, DLRModelHandle handle)
    : library_(std::move(library)), api_(library_->api), handle_(handle) {}

DlrModel::~DlrModel() {
  // Reached without Delete() only when the JavaScript object was collected undisposed, or a
  // load failed half way; the error, if any, has nobody to go to.
  if (handle_ != nullptr) api_.DeleteDLRModel(&handle_);
}

std::shared_ptr<DlrModel> DlrModel::Create(std::shared_ptr<const DlrLibrary> library,
                                           const CreateRequest& request) {
  DLRModelHandle handle = nullptr;
  const int status = library->api.CreateDLRModel(&handle, request.model_path.c_str(),
                                                 request.device_type, request.device_id);
  library->Check(status, "CreateDLRModel", codes::kModelLoadFailed);
  std::shared_ptr<DlrModel> model(new DlrModel(std::move(library), handle));
  if (request.num_threads > 0 && model->api_.SetDLRNumThreads != nullptr) {
    model->library_->Check(model->api_.SetDLRNumThreads(&model->handle_, request.num_threads),
                           "SetDLRNumThreads", codes::kInvalidConfig);
  }
  try {
    model->ReadMetadata();
  } catch (const NativeError& e) {
    const bool own_code = std::string(e.code()) == codes::kUnsupportedDType;
    throw NativeError(own_code ? codes::kUnsupportedDType : codes::kModelLoadFailed,
                      std::string("cannot read the model's inputs and outputs: ") + e.what());
  }
  return model;
}

void DlrModel::ReadMetadata() {
  const DlrLibrary& lib = *library_;
  int inputs = 0;
  lib.Check(api_.GetDLRNumInputs(&handle_, &inputs), "GetDLRNumInputs", codes::kModelLoadFailed);
  CheckCount(inputs, "inputs");
  for (int i = 0; i < inputs; ++i) metadata_.inputs.push_back(ReadInput(i));

  int outputs = 0;
  lib.Check(api_.GetDLRNumOutputs(&handle_, &outputs), "GetDLRNumOutputs", codes::kModelLoadFailed);
  CheckCount(outputs, "outputs");
  if (api_.GetDLRHasMetadata != nullptr && api_.GetDLROutputName != nullptr) {
    bool has_metadata = false;
    lib.Check(api_.GetDLRHasMetadata(&handle_, &has_metadata), "GetDLRHasMetadata",
              codes::kModelLoadFailed);
    metadata_.output_names_known = has_metadata;
  }
  for (int i = 0; i < outputs; ++i) metadata_.outputs.push_back(ReadOutput(i));

  if (api_.GetDLRBackend != nullptr) {
    const char* backend = nullptr;
    lib.Check(api_.GetDLRBackend(&handle_, &backend), "GetDLRBackend", codes::kModelLoadFailed);
    metadata_.backend = Copy(backend);
  }
}

TensorInfo DlrModel::ReadInput(int index) {
  const DlrLibrary& lib = *library_;
  TensorInfo info;
  const char* text = nullptr;
  lib.Check(api_.GetDLRInputName(&handle_, index, &text), "GetDLRInputName", codes::kModelLoadFailed);
  info.name = Copy(text);
  text = nullptr;
  lib.Check(api_.GetDLRInputType(&handle_, index, &text), "GetDLRInputType", codes::kModelLoadFailed);
  info.type = Copy(text);
  int64_t size = 0;
  int rank = 0;
  lib.Check(api_.GetDLRInputSizeDim(&handle_, index, &size, &rank), "GetDLRInputSizeDim",
            codes::kModelLoadFailed);
  CheckRank(rank, "input '" + info.name + "'");
  info.shape.assign(static_cast<size_t>(rank), 0);
  lib.Check(api_.GetDLRInputShape(&handle_, index, info.shape.data()), "GetDLRInputShape",
            codes::kModelLoadFailed);
  info.width = ElementWidth(info.type);
  if (info.width == 0) {
    throw NativeError(codes::kUnsupportedDType,
                      "input '" + info.name + "' has element type '" + info.type + "', which Kiln cannot exchange");
  }
  return info;
}

TensorInfo DlrModel::ReadOutput(int index) {
  const DlrLibrary& lib = *library_;
  TensorInfo info;
  const char* text = nullptr;
  if (metadata_.output_names_known) {
    lib.Check(api_.GetDLROutputName(&handle_, index, &text), "GetDLROutputName", codes::kModelLoadFailed);
    info.name = Copy(text);
  } else {
    // Without DLR's metadata file outputs have no names; these match DLR's Python API.
    info.name = "output_" + std::to_string(index);
  }
  text = nullptr;
  lib.Check(api_.GetDLROutputType(&handle_, index, &text), "GetDLROutputType", codes::kModelLoadFailed);
  info.type = Copy(text);
  int64_t size = 0;
  info.shape = OutputShape(index, &size);
  info.width = ElementWidth(info.type);
  if (info.width == 0) {
    throw NativeError(codes::kUnsupportedDType,
                      "output '" + info.name + "' has element type '" + info.type + "', which Kiln cannot exchange");
  }
  return info;
}

std::vector<int64_t> DlrModel::OutputShape(int index, int64_t* size) {
  const DlrLibrary& lib = *library_;
  int rank = 0;
  lib.Check(api_.GetDLROutputSizeDim(&handle_, index, size, &rank), "GetDLROutputSizeDim",
            codes::kEngineError);
  CheckRank(rank, "output " + std::to_string(index));
  std::vector<int64_t> shape(static_cast<size_t>(rank), 0);
  lib.Check(api_.GetDLROutputShape(&handle_, index, shape.data()), "GetDLROutputShape", codes::kEngineError);
  return shape;
}

std::vector<OutputTensor> DlrModel::Run(const std::vector<InputTensor>& inputs) {
  const DlrLibrary& lib = *library_;
  for (const InputTensor& input : inputs) {
    const TensorInfo& info = metadata_.inputs[input.index];
    lib.Check(api_.SetDLRInput(&handle_, info.name.c_str(), input.shape.data(), input.bytes.data(),
                               static_cast<int>(input.shape.size())),
              "SetDLRInput", codes::kInvalidInput);
  }
  lib.Check(api_.RunDLRModel(&handle_), "RunDLRModel", codes::kEngineError);

  std::vector<OutputTensor> outputs;
  outputs.reserve(metadata_.outputs.size());
  for (size_t i = 0; i < metadata_.outputs.size(); ++i) {
    const TensorInfo& info = metadata_.outputs[i];
    const int index = static_cast<int>(i);
    OutputTensor output;
    int64_t size = 0;
    output.shape = OutputShape(index, &size);
    uint64_t elements = 1;
    for (int64_t dim : output.shape) {
      if (dim < 0 || (dim > 0 && elements > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(dim))) {
        throw NativeError(codes::kEngineError, "DLR reported an invalid shape for output '" + info.name + "'");
      }
      elements *= static_cast<uint64_t>(dim);
    }
    if (size < 0 || static_cast<uint64_t>(size) != elements || elements > kMaxOutputBytes / info.width) {
      throw NativeError(codes::kEngineError, "DLR reported " + std::to_string(size) + " elements for output '" +
                                                 info.name + "', which does not fit its shape");
    }
    output.bytes.resize(static_cast<size_t>(elements * info.width));
    lib.Check(api_.GetDLROutput(&handle_, index, output.bytes.data()), "GetDLROutput", codes::kEngineError);
    outputs.push_back(std::move(output));
  }
  return outputs;
}

void DlrModel::Delete() {
  if (deleted_.exchange(true)) return;
  const int status = api_.DeleteDLRModel(&handle_);
  handle_ = nullptr;
  library_->Check(status, "DeleteDLRModel", codes::kEngineError);
}

}  // namespace kiln::dlr_addon
