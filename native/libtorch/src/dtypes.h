// Kiln dtype names (as @kiln/core spells them) and LibTorch scalar types.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

namespace kiln::torch_addon {

// Throws NativeError(UNSUPPORTED_DTYPE) for dtypes this LibTorch cannot hold (string always;
// uint16/32/64 before LibTorch 2.3).
c10::ScalarType ScalarTypeFromName(const std::string& name);

// Throws NativeError(UNSUPPORTED_DTYPE) for LibTorch types Kiln has no name for (complex,
// quantized…).
std::string NameOfScalarType(c10::ScalarType type);

// Every Kiln dtype this build can carry, in @kiln/core's order.
std::vector<std::string> SupportedDTypeNames();

}  // namespace kiln::torch_addon
