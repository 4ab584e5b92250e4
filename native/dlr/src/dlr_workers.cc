#include "dlr_workers.h"

#include <cstring>
#include <utility>

#include "js_values.h"
#include "library_wrap.h"
#include "model_wrap.h"

namespace kiln::dlr_addon {

namespace {

// Gives the lease back however the work ends.
class LeaseGuard {
 public:
  explicit LeaseGuard(DlrModel& model) : model_(model) {}
  ~LeaseGuard() { model_.Release(); }
  LeaseGuard(const LeaseGuard&) = delete;
  LeaseGuard& operator=(const LeaseGuard&) = delete;

 private:
  DlrModel& model_;
};

}  // namespace

OpenLibraryWorker::OpenLibraryWorker(Napi::Env env, std::string path)
    : PromiseWorker(env, "kiln.dlr.openLibrary"), path_(std::move(path)) {}

void OpenLibraryWorker::Run() { library_ = OpenDlrLibrary(path_); }

Napi::Value OpenLibraryWorker::Result(Napi::Env env) { return LibraryWrap::NewInstance(env, library_); }

CreateModelWorker::CreateModelWorker(Napi::Env env, const Napi::Object& owner,
                                     std::shared_ptr<const DlrLibrary> library, CreateRequest request)
    : PromiseWorker(env, "kiln.dlr.createModel", owner),
      library_(std::move(library)),
      request_(std::move(request)) {}

void CreateModelWorker::Run() { model_ = DlrModel::Create(library_, request_); }

Napi::Value CreateModelWorker::Result(Napi::Env env) { return ModelWrap::NewInstance(env, model_); }

DeviceTypeWorker::DeviceTypeWorker(Napi::Env env, const Napi::Object& owner,
                                   std::shared_ptr<const DlrLibrary> library, std::string model_path)
    : PromiseWorker(env, "kiln.dlr.deviceType", owner),
      library_(std::move(library)),
      model_path_(std::move(model_path)) {}

void DeviceTypeWorker::Run() {
  const DlrApi& api = library_->api;
  if (api.GetDLRDeviceType == nullptr) {
    error_ = "this DLR has no GetDLRDeviceType";
    return;
  }
  device_type_ = api.GetDLRDeviceType(model_path_.c_str());
  if (device_type_ < 0) {
    const char* reason = api.DLRGetLastError();
    error_ = std::string("DLR GetDLRDeviceType failed") + (reason != nullptr && *reason ? std::string(": ") + reason : "");
  }
}

Napi::Value DeviceTypeWorker::Result(Napi::Env env) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("deviceType", Napi::Number::New(env, device_type_ < 0 ? -1 : device_type_));
  result.Set("error", error_.empty() ? env.Null() : Napi::String::New(env, error_));
  return result;
}

RunWorker::RunWorker(Napi::Env env, const Napi::Object& owner, std::shared_ptr<DlrModel> model,
                     std::vector<InputTensor> inputs)
    : PromiseWorker(env, "kiln.dlr.run", owner), model_(std::move(model)), inputs_(std::move(inputs)) {}

void RunWorker::Run() {
  LeaseGuard lease(*model_);
  outputs_ = model_->Run(inputs_);
  inputs_.clear();
}

Napi::Value RunWorker::Result(Napi::Env env) {
  const ModelMetadata& metadata = model_->metadata();
  Napi::Array result = Napi::Array::New(env, outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const TensorInfo& info = metadata.outputs[i];
    OutputTensor& output = outputs_[i];
    Napi::ArrayBuffer data = Napi::ArrayBuffer::New(env, output.bytes.size());
    if (!output.bytes.empty()) std::memcpy(data.Data(), output.bytes.data(), output.bytes.size());
    Napi::Object tensor = Napi::Object::New(env);
    tensor.Set("name", info.name);
    tensor.Set("type", info.type);
    tensor.Set("shape", ShapeToJs(env, output.shape));
    tensor.Set("data", data);
    result.Set(static_cast<uint32_t>(i), tensor);
    output.bytes = std::vector<uint8_t>();
  }
  return result;
}

DeleteWorker::DeleteWorker(Napi::Env env, const Napi::Object& owner, std::shared_ptr<DlrModel> model)
    : PromiseWorker(env, "kiln.dlr.delete", owner), model_(std::move(model)) {}

void DeleteWorker::Run() {
  LeaseGuard lease(*model_);
  model_->Delete();
}

Napi::Value DeleteWorker::Result(Napi::Env env) { return env.Undefined(); }

}  // namespace kiln::dlr_addon
