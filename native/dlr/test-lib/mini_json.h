// A small JSON reader for the conformance library's graph files: objects, arrays, strings,
// numbers, booleans and null. Throws std::runtime_error naming the offset of bad input.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln_conformance {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;

  bool Has(const std::string& key) const;
  // The member `key` of an object; throws when absent or when this is not an object.
  const JsonValue& At(const std::string& key) const;
  const std::string& AsString(const std::string& what) const;
  int64_t AsInt(const std::string& what) const;
  bool AsBool(const std::string& what) const;
  const std::vector<JsonValue>& AsArray(const std::string& what) const;
};

JsonValue ParseJson(const std::string& text);

}  // namespace kiln_conformance
