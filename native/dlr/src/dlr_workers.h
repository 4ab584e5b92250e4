// The addon's long operations, each a PromiseWorker: arguments are copied into members on the
// JavaScript thread, Run() calls DLR on a pool thread without touching N-API, Result()
// converts on the JavaScript thread.
#pragma once

#include <napi.h>

#include <memory>
#include <string>
#include <vector>

#include "dlr_library.h"
#include "dlr_model.h"
#include "kiln/napi/promise_worker.h"

namespace kiln::dlr_addon {

// Resolves a LibraryWrap; rejects ENGINE_UNAVAILABLE with the loader's reason.
class OpenLibraryWorker : public napi::PromiseWorker {
 public:
  OpenLibraryWorker(Napi::Env env, std::string path);

 private:
  void Run() override;
  Napi::Value Result(Napi::Env env) override;

  std::string path_;
  std::shared_ptr<const DlrLibrary> library_;
};

// Resolves a ModelWrap holding a new handle; rejects MODEL_LOAD_FAILED (or INVALID_CONFIG,
// UNSUPPORTED_DTYPE) with DLR's message.
class CreateModelWorker : public napi::PromiseWorker {
 public:
  CreateModelWorker(Napi::Env env, const Napi::Object& owner, std::shared_ptr<const DlrLibrary> library,
                    CreateRequest request);

 private:
  void Run() override;
  Napi::Value Result(Napi::Env env) override;

  std::shared_ptr<const DlrLibrary> library_;
  CreateRequest request_;
  std::shared_ptr<DlrModel> model_;
};

// Resolves `{ deviceType, error }`: the DLPack device type a model folder was compiled for, or
// -1 and DLR's reason when it cannot tell (plain TVM models carry no such metadata).
class DeviceTypeWorker : public napi::PromiseWorker {
 public:
  DeviceTypeWorker(Napi::Env env, const Napi::Object& owner, std::shared_ptr<const DlrLibrary> library,
                   std::string model_path);

 private:
  void Run() override;
  Napi::Value Result(Napi::Env env) override;

  std::shared_ptr<const DlrLibrary> library_;
  std::string model_path_;
  int device_type_ = -1;
  std::string error_;
};

// Holds the model's lease (taken by the caller) and releases it when DLR returns.
class RunWorker : public napi::PromiseWorker {
 public:
  RunWorker(Napi::Env env, const Napi::Object& owner, std::shared_ptr<DlrModel> model,
            std::vector<InputTensor> inputs);

 private:
  void Run() override;
  Napi::Value Result(Napi::Env env) override;

  std::shared_ptr<DlrModel> model_;
  std::vector<InputTensor> inputs_;
  std::vector<OutputTensor> outputs_;
};

// Holds the model's lease (taken by the caller) and deletes the handle.
class DeleteWorker : public napi::PromiseWorker {
 public:
  DeleteWorker(Napi::Env env, const Napi::Object& owner, std::shared_ptr<DlrModel> model);

 private:
  void Run() override;
  Napi::Value Result(Napi::Env env) override;

  std::shared_ptr<DlrModel> model_;
};

}  // namespace kiln::dlr_addon
