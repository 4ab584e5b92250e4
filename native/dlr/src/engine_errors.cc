// DLR reports failures as status codes, never as C++ exceptions, so there are no engine
// exception types to describe (see native/common's errors.h): every failure is already a
// NativeError carrying DLR's message.
#include "kiln/napi/errors.h"

namespace kiln::napi {

bool TranslateEngineException(const std::exception_ptr&, ErrorInfo&) { return false; }

}  // namespace kiln::napi
