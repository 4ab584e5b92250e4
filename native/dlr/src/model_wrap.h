// ModelWrap: one DLR model handle, exported to JavaScript. An opaque handle with explicit
// dispose(). Runs never overlap on one handle: a second run (or a dispose) while one is in
// flight is refused with PREDICTOR_BUSY rather than queued, because queuing belongs to the
// execution context above it.
#pragma once

#include <napi.h>

#include <memory>

#include "dlr_model.h"

namespace kiln::dlr_addon {

class ModelWrap : public Napi::ObjectWrap<ModelWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  static Napi::Object NewInstance(Napi::Env env, std::shared_ptr<DlrModel> model);

  // Only NewInstance constructs these; JavaScript cannot.
  explicit ModelWrap(const Napi::CallbackInfo& info);

 private:
  // Sync getters. inputs/outputs: `[{ name, type, shape }]` (-1 = dynamic dimension).
  Napi::Value Inputs(const Napi::CallbackInfo& info);
  Napi::Value Outputs(const Napi::CallbackInfo& info);
  Napi::Value OutputNamesKnown(const Napi::CallbackInfo& info);
  Napi::Value Backend(const Napi::CallbackInfo& info);
  Napi::Value Busy(const Napi::CallbackInfo& info);
  Napi::Value Disposed(const Napi::CallbackInfo& info);
  // Async. run([{ name, type, shape, data }]) copies every input here, then sets them, runs
  // and reads the outputs off the JavaScript thread. Resolves `[{ name, type, shape, data:
  // ArrayBuffer }]`. Throws INVALID_INPUT / SHAPE_MISMATCH / UNSUPPORTED_DTYPE for inputs that
  // do not fit the model, CLOSED after dispose, PREDICTOR_BUSY while another call runs;
  // rejects with DLR's message when DLR fails.
  Napi::Value Run(const Napi::CallbackInfo& info);
  // Async, idempotent. Deletes the handle; rejects ENGINE_ERROR when DLR reports an error
  // (the handle is gone all the same).
  Napi::Value Dispose(const Napi::CallbackInfo& info);

  std::shared_ptr<DlrModel> model_;
  bool disposing_ = false;
};

}  // namespace kiln::dlr_addon
