// One error path for every N-API entry point of a Kiln addon.
//
// Every exported function, method and async completion runs between KILN_NAPI_BEGIN and
// KILN_NAPI_END(env). Whatever C++ throws in between becomes a JavaScript Error whose `code`
// is one of Kiln's stable error codes, so no exception can escape into Node and no engine
// error reaches JavaScript without a code.
#pragma once

#include <napi.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#ifndef NAPI_CPP_EXCEPTIONS
#error "Kiln addons are built with NAPI_CPP_EXCEPTIONS (see native/common/kiln_napi.cmake)"
#endif

namespace kiln::napi {

// Stable codes shared with @kiln/core's KilnErrorCode. Only the ones addons raise are listed.
namespace code {
inline constexpr const char* kInvalidInput = "INVALID_INPUT";
inline constexpr const char* kUnsupportedDType = "UNSUPPORTED_DTYPE";
inline constexpr const char* kUnsupportedFormat = "UNSUPPORTED_FORMAT";
inline constexpr const char* kShapeMismatch = "SHAPE_MISMATCH";
inline constexpr const char* kModelLoadFailed = "MODEL_LOAD_FAILED";
inline constexpr const char* kInvalidConfig = "INVALID_CONFIG";
inline constexpr const char* kEngineError = "ENGINE_ERROR";
inline constexpr const char* kClosed = "CLOSED";
inline constexpr const char* kInternal = "INTERNAL";
}  // namespace code

// A failure with a stable code, thrown by addon code that knows what went wrong.
class NativeError : public std::runtime_error {
 public:
  NativeError(const char* code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  const char* code() const noexcept { return code_; }

 private:
  const char* code_;
};

// What JavaScript receives: a code and a message. Plain data, safe to keep across threads.
struct ErrorInfo {
  std::string code;
  std::string message;
};

// Each addon defines this once: it describes exceptions of its engine's own types (for
// LibTorch, c10::Error without its C++ backtrace). Returns false for exceptions it does not
// know, which then fall through to the generic rules below.
bool TranslateEngineException(const std::exception_ptr& error, ErrorInfo& info);

// Describes the exception being handled. Must be called inside a catch block.
inline ErrorInfo DescribeCurrentException() {
  std::exception_ptr current = std::current_exception();
  ErrorInfo info;
  try {
    if (TranslateEngineException(current, info)) return info;
  } catch (...) {
    return {code::kInternal, "the engine error could not be described"};
  }
  try {
    std::rethrow_exception(current);
  } catch (const NativeError& e) {
    return {e.code(), e.what()};
  } catch (const Napi::Error& e) {
    return {code::kInvalidInput, e.Message()};
  } catch (const std::bad_alloc&) {
    return {code::kEngineError, "out of memory"};
  } catch (const std::exception& e) {
    return {code::kEngineError, e.what()};
  } catch (...) {
    return {code::kInternal, "unknown native exception"};
  }
}

// A JavaScript Error carrying `code` (and `name` = 'KilnNativeError' so callers can tell
// engine failures from programming errors in their own code).
inline Napi::Error MakeJsError(Napi::Env env, const ErrorInfo& info) {
  Napi::Error error = Napi::Error::New(env, info.message.empty() ? info.code : info.message);
  error.Set("code", Napi::String::New(env, info.code));
  error.Set("name", Napi::String::New(env, "KilnNativeError"));
  return error;
}

// Rethrows the exception being handled as a JavaScript exception. An exception that is
// already a JavaScript one (a pending Napi::Error) passes through unchanged.
[[noreturn]] inline void ThrowCurrentAsJs(Napi::Env env) {
  try {
    throw;
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    throw MakeJsError(env, DescribeCurrentException());
  }
}

// For entry points that return a promise: the exception being handled as a rejected promise,
// so that asynchronous methods never throw synchronously.
inline Napi::Value RejectCurrent(Napi::Env env) {
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  try {
    throw;
  } catch (const Napi::Error& e) {
    deferred.Reject(e.Value());
  } catch (...) {
    deferred.Reject(MakeJsError(env, DescribeCurrentException()).Value());
  }
  return deferred.Promise();
}

// Throws NativeError(code, message) unless `condition` holds.
inline void Check(bool condition, const char* error_code, const std::string& message) {
  if (!condition) throw NativeError(error_code, message);
}

}  // namespace kiln::napi

// The begin/end pair around the body of every entry point. Entry points that return a
// promise end with KILN_NAPI_END_ASYNC instead: their failures reject the promise.
#define KILN_NAPI_BEGIN try {
#define KILN_NAPI_END(env)                  \
  }                                         \
  catch (...) {                             \
    ::kiln::napi::ThrowCurrentAsJs(env);    \
  }
#define KILN_NAPI_END_ASYNC(env)                \
  }                                             \
  catch (...) {                                 \
    return ::kiln::napi::RejectCurrent(env);    \
  }
