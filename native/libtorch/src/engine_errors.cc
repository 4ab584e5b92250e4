// How LibTorch's exceptions reach JavaScript (see native/common's errors.h).
#include <c10/util/Exception.h>
#include <torch/csrc/jit/frontend/error_report.h>
#include <torch/csrc/jit/runtime/jit_exception.h>

#include <string>

#include "kiln/napi/errors.h"

namespace kiln::napi {

bool TranslateEngineException(const std::exception_ptr& error, ErrorInfo& info) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::OutOfMemoryError& e) {
    info = {code::kEngineError, std::string("out of memory: ") + e.what_without_backtrace()};
  } catch (const c10::Error& e) {
    // The C++ backtrace is for LibTorch's developers, not for a serving API's clients.
    info = {code::kEngineError, e.what_without_backtrace()};
  } catch (const torch::jit::JITException& e) {
    info = {code::kEngineError, e.what()};
  } catch (const torch::jit::ErrorReport& e) {
    // TorchScript compilation errors come from source the caller supplied.
    info = {code::kInvalidInput, e.what()};
  } catch (...) {
    return false;
  }
  return true;
}

}  // namespace kiln::napi
