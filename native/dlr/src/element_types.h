// DLR names element types as TVM does ("float32", "int64", "uint8", "bool"…).
#pragma once

#include <cstddef>
#include <string>

namespace kiln::dlr_addon {

// Bytes per element of a TVM type name; 0 for types this addon cannot exchange (vector
// lanes such as "float32x4", sub-byte or custom types).
size_t ElementWidth(const std::string& type);

}  // namespace kiln::dlr_addon
