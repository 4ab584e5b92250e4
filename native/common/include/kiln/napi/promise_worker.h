// Base of every long operation of a Kiln addon: runs on the libuv thread pool and settles a
// promise on the JavaScript thread.
//
// Contract (sharp / node-llama-cpp style):
// - The constructor runs on the JavaScript thread and copies every argument into plain C++
//   members. Run() executes on a pool thread and must not touch N-API at all.
// - Result() runs back on the JavaScript thread and turns the plain results into JS values.
// - Any exception, from Run() or Result(), rejects the promise with a coded Error (errors.h).
// - The worker holds a reference to its owner object (the wrap it was started from), so the
//   owner cannot be collected while the operation runs.
#pragma once

#include <napi.h>

#include <string>

#include "kiln/napi/errors.h"

namespace kiln::napi {

class PromiseWorker : public Napi::AsyncWorker {
 public:
  // Queues the worker and returns its promise. The worker deletes itself when done.
  Napi::Promise Start() {
    Napi::Promise promise = deferred_.Promise();
    Queue();
    return promise;
  }

 protected:
  PromiseWorker(Napi::Env env, const char* resource_name)
      : Napi::AsyncWorker(env, resource_name), deferred_(Napi::Promise::Deferred::New(env)) {}

  PromiseWorker(Napi::Env env, const char* resource_name, const Napi::Object& owner)
      : PromiseWorker(env, resource_name) {
    owner_ = Napi::Persistent(owner);
  }

  // Off the JavaScript thread. Throw to reject.
  virtual void Run() = 0;
  // On the JavaScript thread, after Run() succeeded. Throw to reject.
  virtual Napi::Value Result(Napi::Env env) = 0;

 private:
  void Execute() final {
    try {
      Run();
    } catch (...) {
      error_ = DescribeCurrentException();
      // AsyncWorker only calls OnError for a non-empty message.
      SetError(error_.message.empty() ? error_.code : error_.message);
    }
  }

  void OnOK() final {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    try {
      deferred_.Resolve(Result(env));
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
    } catch (...) {
      deferred_.Reject(MakeJsError(env, DescribeCurrentException()).Value());
    }
  }

  void OnError(const Napi::Error&) final {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    deferred_.Reject(MakeJsError(env, error_).Value());
  }

  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference owner_;
  ErrorInfo error_;
};

}  // namespace kiln::napi
