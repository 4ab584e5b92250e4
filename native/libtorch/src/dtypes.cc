#include "dtypes.h"

#include <torch/version.h>

#include <utility>

#include "kiln/napi/errors.h"

namespace kiln::torch_addon {
namespace {

// LibTorch gained unsigned 16/32/64-bit tensors in 2.3.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define KILN_TORCH_HAS_WIDE_UNSIGNED 1
#else
#define KILN_TORCH_HAS_WIDE_UNSIGNED 0
#endif

const std::vector<std::pair<const char*, c10::ScalarType>>& Table() {
  static const std::vector<std::pair<const char*, c10::ScalarType>> table = {
      {"bool", c10::ScalarType::Bool},
      {"int8", c10::ScalarType::Char},
      {"int16", c10::ScalarType::Short},
      {"int32", c10::ScalarType::Int},
      {"int64", c10::ScalarType::Long},
      {"uint8", c10::ScalarType::Byte},
#if KILN_TORCH_HAS_WIDE_UNSIGNED
      {"uint16", c10::ScalarType::UInt16},
      {"uint32", c10::ScalarType::UInt32},
      {"uint64", c10::ScalarType::UInt64},
#endif
      {"float16", c10::ScalarType::Half},
      {"bfloat16", c10::ScalarType::BFloat16},
      {"float32", c10::ScalarType::Float},
      {"float64", c10::ScalarType::Double},
  };
  return table;
}

}  // namespace

c10::ScalarType ScalarTypeFromName(const std::string& name) {
  for (const auto& [kiln_name, type] : Table()) {
    if (name == kiln_name) return type;
  }
  if (name == "string") {
    throw napi::NativeError(napi::code::kUnsupportedDType,
                            "LibTorch has no string tensors; convert strings to token ids in "
                            "the translator before calling the model");
  }
  if (name == "uint16" || name == "uint32" || name == "uint64") {
    throw napi::NativeError(napi::code::kUnsupportedDType,
                            name + " tensors need LibTorch 2.3 or newer (this is " +
                                TORCH_VERSION + ")");
  }
  throw napi::NativeError(napi::code::kUnsupportedDType, "unknown dtype \"" + name + "\"");
}

std::string NameOfScalarType(c10::ScalarType type) {
  for (const auto& [kiln_name, table_type] : Table()) {
    if (type == table_type) return kiln_name;
  }
  throw napi::NativeError(napi::code::kUnsupportedDType,
                          std::string("LibTorch tensors of type ") + c10::toString(type) +
                              " have no Kiln dtype");
}

std::vector<std::string> SupportedDTypeNames() {
  std::vector<std::string> names;
  for (const auto& entry : Table()) names.emplace_back(entry.first);
  return names;
}

}  // namespace kiln::torch_addon
