#include "input_tensors.h"

#include <cstring>
#include <limits>
#include <string>

#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"

namespace kiln::dlr_addon {

namespace {

namespace codes = napi::code;

std::string FormatShape(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string InputNames(const ModelMetadata& metadata) {
  std::string names;
  for (const TensorInfo& info : metadata.inputs) names += (names.empty() ? "" : ", ") + info.name;
  return names.empty() ? "none" : names;
}

size_t FindInput(const ModelMetadata& metadata, const std::string& name) {
  for (size_t i = 0; i < metadata.inputs.size(); ++i) {
    if (metadata.inputs[i].name == name) return i;
  }
  throw napi::NativeError(codes::kInvalidInput,
                          "the model has no input named '" + name + "' (inputs: " + InputNames(metadata) + ")");
}

std::vector<int64_t> ReadShape(const TensorInfo& info, const Napi::Value& value, const std::string& what) {
  Napi::Array array = napi::RequireArray(value, what + ".shape");
  std::vector<int64_t> shape;
  for (uint32_t d = 0; d < array.Length(); ++d) {
    const int64_t dim = napi::RequireInt(array.Get(d), what + ".shape[" + std::to_string(d) + "]");
    napi::Check(dim >= 0, codes::kInvalidInput, what + " has a negative dimension");
    shape.push_back(dim);
  }
  bool fits = shape.size() == info.shape.size();
  for (size_t d = 0; fits && d < shape.size(); ++d) fits = info.shape[d] < 0 || info.shape[d] == shape[d];
  napi::Check(fits, codes::kShapeMismatch,
              "input '" + info.name + "' needs shape " + FormatShape(info.shape) + ", got " + FormatShape(shape));
  return shape;
}

uint64_t ByteLength(const TensorInfo& info, const std::vector<int64_t>& shape) {
  uint64_t bytes = info.width;
  for (int64_t dim : shape) {
    const uint64_t d = static_cast<uint64_t>(dim);
    napi::Check(d == 0 || bytes <= std::numeric_limits<uint64_t>::max() / d, codes::kInvalidInput,
                "input '" + info.name + "' is too large");
    bytes *= d;
  }
  return bytes;
}

}  // namespace

std::vector<InputTensor> InputsFromJs(const ModelMetadata& metadata, const Napi::Value& value) {
  Napi::Array list = napi::RequireArray(value, "inputs");
  std::vector<bool> given(metadata.inputs.size(), false);
  std::vector<InputTensor> inputs;
  for (uint32_t i = 0; i < list.Length(); ++i) {
    const std::string what = "inputs[" + std::to_string(i) + "]";
    Napi::Object tensor = napi::RequireObject(list.Get(i), what);
    InputTensor input;
    input.index = FindInput(metadata, napi::RequireString(tensor.Get("name"), what + ".name"));
    const TensorInfo& info = metadata.inputs[input.index];
    napi::Check(!given[input.index], codes::kInvalidInput, "input '" + info.name + "' is given twice");
    given[input.index] = true;
    const std::string type = napi::RequireString(tensor.Get("type"), what + ".type");
    napi::Check(type == info.type, codes::kUnsupportedDType,
                "input '" + info.name + "' is " + info.type + ", got " + type);
    input.shape = ReadShape(info, tensor.Get("shape"), what);
    Napi::Value data = tensor.Get("data");
    napi::Check(data.IsTypedArray(), codes::kInvalidInput, what + ".data must be a typed array");
    // The raw call gives the element pointer for views over SharedArrayBuffers too.
    napi_typedarray_type kind;
    size_t length = 0;
    void* start = nullptr;
    napi_value buffer;
    size_t offset = 0;
    napi_status status = napi_get_typedarray_info(data.Env(), data, &kind, &length, &start, &buffer, &offset);
    napi::Check(status == napi_ok, codes::kInvalidInput, what + ".data cannot be read");
    const uint64_t byte_length = static_cast<uint64_t>(length) * Napi::TypedArray(data.Env(), data).ElementSize();
    const uint64_t expected = ByteLength(info, input.shape);
    napi::Check(byte_length == expected, codes::kInvalidInput,
                "input '" + info.name + "' holds " + std::to_string(byte_length) + " bytes, but shape " +
                    FormatShape(input.shape) + " of " + info.type + " needs " + std::to_string(expected));
    input.bytes.resize(static_cast<size_t>(expected));
    if (expected > 0) std::memcpy(input.bytes.data(), start, static_cast<size_t>(expected));
    inputs.push_back(std::move(input));
  }
  std::string missing;
  for (size_t i = 0; i < given.size(); ++i) {
    if (!given[i]) missing += (missing.empty() ? "" : ", ") + metadata.inputs[i].name;
  }
  napi::Check(missing.empty(), codes::kInvalidInput, "missing input(s): " + missing);
  return inputs;
}

}  // namespace kiln::dlr_addon
