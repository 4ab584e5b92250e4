#include "addon.h"

#include <cstdlib>
#include <string>

#include "dlr_workers.h"
#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"
#include "library_wrap.h"
#include "model_wrap.h"

namespace kiln::dlr_addon {

DlrAddon::DlrAddon(Napi::Env env, Napi::Object exports) {
  library_constructor = Napi::Persistent(LibraryWrap::Define(env));
  model_constructor = Napi::Persistent(ModelWrap::Define(env));
  DefineAddon(exports, {
                           InstanceMethod<&DlrAddon::OpenLibrary>("openLibrary"),
                           InstanceMethod<&DlrAddon::DefaultTvmThreads>("defaultTvmThreads"),
                       });
}

Napi::Value DlrAddon::OpenLibrary(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  std::string path = napi::RequireString(napi::Arg(info, 0), "library path");
  napi::Check(!path.empty(), napi::code::kInvalidInput, "library path must not be empty");
  return (new OpenLibraryWorker(info.Env(), std::move(path)))->Start();
  KILN_NAPI_END(info.Env())
}

Napi::Value DlrAddon::DefaultTvmThreads(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  const int64_t threads = napi::RequireInt(napi::Arg(info, 0), "threads");
  napi::Check(threads > 0 && threads <= 4096, napi::code::kInvalidConfig, "threads must be within 1..4096");
  const char* current = std::getenv("TVM_NUM_THREADS");
  if (current != nullptr && *current != '\0') return Napi::String::New(info.Env(), current);
  const std::string value = std::to_string(threads);
#ifdef _WIN32
  _putenv_s("TVM_NUM_THREADS", value.c_str());
#else
  setenv("TVM_NUM_THREADS", value.c_str(), 0);
#endif
  return Napi::String::New(info.Env(), value);
  KILN_NAPI_END(info.Env())
}

}  // namespace kiln::dlr_addon

using KilnDlrAddon = kiln::dlr_addon::DlrAddon;
NODE_API_NAMED_ADDON(kiln_dlr, KilnDlrAddon)
