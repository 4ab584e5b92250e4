// Starting a forward from JavaScript, shared by ModuleWrap and ContextWrap.
#pragma once

#include <napi.h>

#include <memory>

#include "forward_thread.h"
#include "loaded_module.h"

namespace kiln::torch_addon {

// JavaScript thread: reads forward(args, settings) from `info`, converting the arguments with
// the types forward declares (their number is checked here, so a wrong call is INVALID_INPUT),
// and starts a ForwardWorker. Returns its promise.
Napi::Value StartForward(const Napi::CallbackInfo& info, std::shared_ptr<LoadedModule> module,
                         std::shared_ptr<ForwardThread> thread);

}  // namespace kiln::torch_addon
