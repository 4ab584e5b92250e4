// Reading JavaScript arguments on the JavaScript thread. Every reader throws NativeError with
// code INVALID_INPUT naming the argument, so entry points need no checks of their own.
#pragma once

#include <napi.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/napi/errors.h"

namespace kiln::napi {

inline Napi::Value Arg(const Napi::CallbackInfo& info, size_t index) {
  return index < info.Length() ? info[index] : info.Env().Undefined();
}

inline std::string RequireString(const Napi::Value& value, const std::string& what) {
  Check(value.IsString(), code::kInvalidInput, what + " must be a string");
  return value.As<Napi::String>().Utf8Value();
}

inline Napi::Object RequireObject(const Napi::Value& value, const std::string& what) {
  Check(value.IsObject() && !value.IsArray(), code::kInvalidInput, what + " must be an object");
  return value.As<Napi::Object>();
}

inline Napi::Array RequireArray(const Napi::Value& value, const std::string& what) {
  Check(value.IsArray(), code::kInvalidInput, what + " must be an array");
  return value.As<Napi::Array>();
}

inline bool IsAbsent(const Napi::Value& value) {
  return value.IsUndefined() || value.IsNull();
}

inline int64_t RequireInt(const Napi::Value& value, const std::string& what) {
  if (value.IsBigInt()) {
    bool lossless = false;
    int64_t result = value.As<Napi::BigInt>().Int64Value(&lossless);
    Check(lossless, code::kInvalidInput, what + " does not fit in 64 bits");
    return result;
  }
  Check(value.IsNumber(), code::kInvalidInput, what + " must be an integer");
  double number = value.As<Napi::Number>().DoubleValue();
  Check(std::isfinite(number) && std::floor(number) == number &&
            std::fabs(number) <= 9007199254740991.0,
        code::kInvalidInput, what + " must be a safe integer");
  return static_cast<int64_t>(number);
}

inline double RequireNumber(const Napi::Value& value, const std::string& what) {
  Check(value.IsNumber(), code::kInvalidInput, what + " must be a number");
  return value.As<Napi::Number>().DoubleValue();
}

inline bool RequireBool(const Napi::Value& value, const std::string& what) {
  Check(value.IsBoolean(), code::kInvalidInput, what + " must be a boolean");
  return value.As<Napi::Boolean>().Value();
}

// Optional object properties: absent (undefined or null) gives nullopt.
inline std::optional<bool> OptionalBool(const Napi::Object& object, const char* key) {
  Napi::Value value = object.Get(key);
  if (IsAbsent(value)) return std::nullopt;
  return RequireBool(value, key);
}

inline std::optional<int64_t> OptionalInt(const Napi::Object& object, const char* key) {
  Napi::Value value = object.Get(key);
  if (IsAbsent(value)) return std::nullopt;
  return RequireInt(value, key);
}

inline std::optional<std::string> OptionalString(const Napi::Object& object, const char* key) {
  Napi::Value value = object.Get(key);
  if (IsAbsent(value)) return std::nullopt;
  return RequireString(value, key);
}

inline std::vector<std::string> OptionalStringArray(const Napi::Object& object, const char* key) {
  std::vector<std::string> result;
  Napi::Value value = object.Get(key);
  if (IsAbsent(value)) return result;
  Napi::Array array = RequireArray(value, key);
  for (uint32_t i = 0; i < array.Length(); ++i) {
    result.push_back(RequireString(array.Get(i), std::string(key) + "[" + std::to_string(i) + "]"));
  }
  return result;
}

// Strings keyed by strings (an object of string values), in property order.
inline std::vector<std::pair<std::string, std::string>> RequireStringMap(const Napi::Value& value,
                                                                         const std::string& what) {
  std::vector<std::pair<std::string, std::string>> result;
  Napi::Object map = RequireObject(value, what);
  Napi::Array names = map.GetPropertyNames();
  for (uint32_t i = 0; i < names.Length(); ++i) {
    std::string name = names.Get(i).ToString().Utf8Value();
    result.emplace_back(name, RequireString(map.Get(name), what + "." + name));
  }
  return result;
}

}  // namespace kiln::napi
