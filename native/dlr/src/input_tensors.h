// Copies run() inputs out of JavaScript (on the JavaScript thread), checking each against the
// model: DLR's SetDLRInput takes no byte length, so a buffer smaller than its shape would be
// read past its end. Nothing reaches DLR unchecked.
#pragma once

#include <napi.h>

#include <vector>

#include "dlr_model.h"

namespace kiln::dlr_addon {

// Throws INVALID_INPUT (unknown, repeated or missing input, wrong byte length),
// UNSUPPORTED_DTYPE (type differs from the model's) or SHAPE_MISMATCH (rank or fixed
// dimension differs).
std::vector<InputTensor> InputsFromJs(const ModelMetadata& metadata, const Napi::Value& value);

}  // namespace kiln::dlr_addon
