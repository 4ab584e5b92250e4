#include "dlr_library.h"

#include <map>
#include <mutex>

#include "dlr_codes.h"
#include "kiln/napi/errors.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <dlfcn.h>
#endif

namespace kiln::dlr_addon {

namespace {

#ifdef _WIN32
void* OpenShared(const std::string& path, std::string& error) {
  HMODULE module = LoadLibraryA(path.c_str());
  if (module == nullptr) error = "LoadLibrary failed with error " + std::to_string(GetLastError());
  return module;
}
void* FindSymbol(void* library, const char* name) {
  return reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(library), name));
}
#else
void* OpenShared(const std::string& path, std::string& error) {
  // RTLD_LOCAL: two different DLR builds (or DLR and a conformance library) can coexist.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    error = reason == nullptr ? "dlopen failed" : reason;
  }
  return library;
}
void* FindSymbol(void* library, const char* name) { return dlsym(library, name); }
#endif

template <typename Fn>
void Resolve(void* library, const char* name, Fn& slot, std::vector<std::string>& missing) {
  slot = reinterpret_cast<Fn>(FindSymbol(library, name));
  if (slot == nullptr) missing.emplace_back(name);
}

std::shared_ptr<const DlrLibrary> Load(const std::string& path) {
  std::string error;
  void* handle = OpenShared(path, error);
  if (handle == nullptr) throw napi::NativeError(code::kEngineUnavailable, error);

  auto library = std::make_shared<DlrLibrary>();
  library->path = path;
  DlrApi& api = library->api;
  std::vector<std::string> missing;
  Resolve(handle, "CreateDLRModel", api.CreateDLRModel, missing);
  Resolve(handle, "DeleteDLRModel", api.DeleteDLRModel, missing);
  Resolve(handle, "RunDLRModel", api.RunDLRModel, missing);
  Resolve(handle, "GetDLRNumInputs", api.GetDLRNumInputs, missing);
  Resolve(handle, "GetDLRInputName", api.GetDLRInputName, missing);
  Resolve(handle, "GetDLRInputType", api.GetDLRInputType, missing);
  Resolve(handle, "GetDLRInputSizeDim", api.GetDLRInputSizeDim, missing);
  Resolve(handle, "GetDLRInputShape", api.GetDLRInputShape, missing);
  Resolve(handle, "SetDLRInput", api.SetDLRInput, missing);
  Resolve(handle, "GetDLRNumOutputs", api.GetDLRNumOutputs, missing);
  Resolve(handle, "GetDLROutputType", api.GetDLROutputType, missing);
  Resolve(handle, "GetDLROutputSizeDim", api.GetDLROutputSizeDim, missing);
  Resolve(handle, "GetDLROutputShape", api.GetDLROutputShape, missing);
  Resolve(handle, "GetDLROutput", api.GetDLROutput, missing);
  Resolve(handle, "DLRGetLastError", api.DLRGetLastError, missing);
  if (!missing.empty()) {
    // A library that is not DLR stays mapped (closing what we could not use gains nothing and
    // some libraries misbehave when unloaded), but it is never used.
    std::string list;
    for (const std::string& name : missing) list += (list.empty() ? "" : ", ") + name;
    throw napi::NativeError(code::kEngineUnavailable,
                            "not a DLR library (DLR 1.5 or later): it lacks " + list);
  }
  Resolve(handle, "GetDLRHasMetadata", api.GetDLRHasMetadata, library->missing_optional);
  Resolve(handle, "GetDLROutputName", api.GetDLROutputName, library->missing_optional);
  Resolve(handle, "GetDLRBackend", api.GetDLRBackend, library->missing_optional);
  Resolve(handle, "GetDLRDeviceType", api.GetDLRDeviceType, library->missing_optional);
  Resolve(handle, "GetDLRVersion", api.GetDLRVersion, library->missing_optional);
  Resolve(handle, "SetDLRNumThreads", api.SetDLRNumThreads, library->missing_optional);
  const char* version = nullptr;
  if (api.GetDLRVersion != nullptr && api.GetDLRVersion(&version) == 0 && version != nullptr) {
    library->version = version;
  }
  return library;
}

}  // namespace

void DlrLibrary::Check(int status, const char* function, const char* error_code) const {
  if (status == 0) return;
  const char* reason = api.DLRGetLastError();
  std::string message = std::string("DLR ") + function + " failed";
  if (reason != nullptr && reason[0] != '\0') message += std::string(": ") + reason;
  throw napi::NativeError(error_code, message);
}

std::shared_ptr<const DlrLibrary> OpenDlrLibrary(const std::string& path) {
  static std::mutex mutex;
  // Never destroyed: worker threads may still hold models while the process exits.
  static auto* opened = new std::map<std::string, std::shared_ptr<const DlrLibrary>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto found = opened->find(path);
  if (found != opened->end()) return found->second;
  std::shared_ptr<const DlrLibrary> library = Load(path);
  opened->emplace(path, library);
  return library;
}

}  // namespace kiln::dlr_addon
