// LibraryWrap: an opened libdlr, exported to JavaScript. Made only by openLibrary().
#pragma once

#include <napi.h>

#include <memory>

#include "dlr_library.h"

namespace kiln::dlr_addon {

class LibraryWrap : public Napi::ObjectWrap<LibraryWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  static Napi::Object NewInstance(Napi::Env env, std::shared_ptr<const DlrLibrary> library);

  // Only NewInstance constructs these; JavaScript cannot.
  explicit LibraryWrap(const Napi::CallbackInfo& info);

 private:
  // Sync getters: the file opened, DLR's version (null when unknown), and the optional DLR
  // functions this library lacks.
  Napi::Value Path(const Napi::CallbackInfo& info);
  Napi::Value Version(const Napi::CallbackInfo& info);
  Napi::Value MissingOptional(const Napi::CallbackInfo& info);
  // Async. createModel({ modelPath, deviceType, deviceId, numThreads }) resolves a model
  // object owning a new DLR handle; rejects MODEL_LOAD_FAILED with DLR's message.
  Napi::Value CreateModel(const Napi::CallbackInfo& info);
  // Async. deviceTypeOf(modelPath) resolves `{ deviceType, error }` (GetDLRDeviceType).
  Napi::Value DeviceTypeOf(const Napi::CallbackInfo& info);

  std::shared_ptr<const DlrLibrary> library_;
};

}  // namespace kiln::dlr_addon
