// Conversions of the addon's plain C++ values to JavaScript (JavaScript thread only).
#pragma once

#include <napi.h>

#include <cstdint>
#include <vector>

#include "dlr_model.h"

namespace kiln::dlr_addon {

// Dimensions as numbers; -1 stays -1 (dynamic).
Napi::Array ShapeToJs(Napi::Env env, const std::vector<int64_t>& shape);
// `{ name, type, shape }`.
Napi::Object TensorInfoToJs(Napi::Env env, const TensorInfo& info);

}  // namespace kiln::dlr_addon
