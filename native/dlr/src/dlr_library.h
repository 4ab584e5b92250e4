// libdlr opened at run time. A library stays loaded for the life of the process: the TVM
// runtime registers global state that cannot be unloaded safely, and models hold pointers
// into it. Opening the same path again returns the same library.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dlr_api.h"

namespace kiln::dlr_addon {

struct DlrLibrary {
  std::string path;
  DlrApi api{};
  // DLR's own version string, or empty when the library does not report one.
  std::string version;
  // Optional functions this library lacks.
  std::vector<std::string> missing_optional;

  // Throws NativeError(error_code, "<function> failed: <DLR's last error>") unless status is
  // 0. DLR keeps its last error per thread: call this on the thread that made the call.
  void Check(int status, const char* function, const char* error_code) const;
};

// Thread-safe. Throws NativeError(ENGINE_UNAVAILABLE) saying why the path cannot be used.
std::shared_ptr<const DlrLibrary> OpenDlrLibrary(const std::string& path);

}  // namespace kiln::dlr_addon
