#include "element_types.h"

#include <map>

namespace kiln::dlr_addon {

size_t ElementWidth(const std::string& type) {
  static const std::map<std::string, size_t> kWidths = {
      {"bool", 1},    {"int8", 1},    {"uint8", 1},    {"int16", 2},    {"uint16", 2},
      {"float16", 2}, {"bfloat16", 2}, {"int32", 4},   {"uint32", 4},   {"float32", 4},
      {"int64", 8},   {"uint64", 8},  {"float64", 8},
  };
  auto found = kWidths.find(type);
  return found == kWidths.end() ? 0 : found->second;
}

}  // namespace kiln::dlr_addon
