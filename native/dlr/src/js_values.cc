#include "js_values.h"

namespace kiln::dlr_addon {

Napi::Array ShapeToJs(Napi::Env env, const std::vector<int64_t>& shape) {
  Napi::Array array = Napi::Array::New(env, shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    array.Set(static_cast<uint32_t>(i), Napi::Number::New(env, static_cast<double>(shape[i])));
  }
  return array;
}

Napi::Object TensorInfoToJs(Napi::Env env, const TensorInfo& info) {
  Napi::Object object = Napi::Object::New(env);
  object.Set("name", info.name);
  object.Set("type", info.type);
  object.Set("shape", ShapeToJs(env, info.shape));
  return object;
}

}  // namespace kiln::dlr_addon
