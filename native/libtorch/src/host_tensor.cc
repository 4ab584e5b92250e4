#include "host_tensor.h"

#include <ATen/ATen.h>

#include <cstring>
#include <limits>
#include <vector>

#include "dtypes.h"
#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"

namespace kiln::torch_addon {
namespace {

using napi::code::kInvalidInput;

napi_typedarray_type TypedArrayTypeOf(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Bool:
    case c10::ScalarType::Byte:
      return napi_uint8_array;
    case c10::ScalarType::Char:
      return napi_int8_array;
    case c10::ScalarType::Short:
      return napi_int16_array;
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
      return napi_uint16_array;
    case c10::ScalarType::Int:
      return napi_int32_array;
    case c10::ScalarType::Long:
      return napi_bigint64_array;
    case c10::ScalarType::Float:
      return napi_float32_array;
    case c10::ScalarType::Double:
      return napi_float64_array;
    default:
      break;
  }
  // Wider unsigned types exist only in newer LibTorch; their names map them.
  const std::string name = NameOfScalarType(type);
  if (name == "uint16") return napi_uint16_array;
  if (name == "uint32") return napi_uint32_array;
  if (name == "uint64") return napi_biguint64_array;
  throw napi::NativeError(napi::code::kUnsupportedDType, "no TypedArray holds " + name);
}

std::vector<int64_t> ReadShape(const Napi::Value& value, const std::string& what) {
  Napi::Array array = napi::RequireArray(value, what + ".shape");
  std::vector<int64_t> shape;
  shape.reserve(array.Length());
  for (uint32_t i = 0; i < array.Length(); ++i) {
    int64_t dim = napi::RequireInt(array.Get(i), what + ".shape[" + std::to_string(i) + "]");
    napi::Check(dim >= 0, kInvalidInput, what + " has a negative dimension");
    shape.push_back(dim);
  }
  return shape;
}

// Elements of `shape`, refusing products that overflow (a forged shape must not allocate).
int64_t CheckedNumel(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t numel = 1;
  for (int64_t dim : shape) {
    napi::Check(dim == 0 || numel <= std::numeric_limits<int64_t>::max() / dim, kInvalidInput,
                what + " has too many elements");
    numel *= dim;
  }
  return numel;
}

// V8 counts the bytes of array buffer backing stores itself, so GC pressure needs no help.
void FreeTensorHolder(Napi::Env, void*, at::Tensor* holder) { delete holder; }

}  // namespace

bool IsJsTensor(const Napi::Value& value) {
  if (!value.IsObject() || value.IsArray()) return false;
  Napi::Object object = value.As<Napi::Object>();
  return object.Get("data").IsTypedArray() && object.Get("dtype").IsString() &&
         object.Get("shape").IsArray();
}

at::Tensor TensorFromJs(const Napi::Object& object, const std::string& what, bool pinned) {
  const std::string dtype = napi::RequireString(object.Get("dtype"), what + ".dtype");
  const c10::ScalarType type = ScalarTypeFromName(dtype);
  const std::vector<int64_t> shape = ReadShape(object.Get("shape"), what);
  Napi::Value data_value = object.Get("data");
  napi::Check(data_value.IsTypedArray(), kInvalidInput, what + ".data must be a TypedArray");
  Napi::TypedArray data = data_value.As<Napi::TypedArray>();

  const int64_t numel = CheckedNumel(shape, what);
  const size_t element_size = c10::elementSize(type);
  napi::Check(static_cast<uint64_t>(numel) <= data.ByteLength() / element_size &&
                  static_cast<size_t>(numel) * element_size == data.ByteLength(),
              napi::code::kShapeMismatch,
              what + ": " + std::to_string(data.ByteLength()) + " bytes do not hold " +
                  std::to_string(numel) + " " + dtype + " elements");

  at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(type).pinned_memory(pinned));
  const uint8_t* source =
      static_cast<const uint8_t*>(data.ArrayBuffer().Data()) + data.ByteOffset();
  if (data.ByteLength() > 0) std::memcpy(tensor.data_ptr(), source, data.ByteLength());
  if (type == c10::ScalarType::Bool) {
    // LibTorch assumes bool bytes are 0 or 1; JavaScript may hand any byte.
    auto* bytes = static_cast<uint8_t*>(tensor.data_ptr());
    for (int64_t i = 0; i < numel; ++i) bytes[i] = bytes[i] != 0;
  }
  return tensor;
}

Napi::Object TensorToJs(Napi::Env env, const at::Tensor& source) {
  napi::Check(source.device().is_cpu() && source.is_contiguous(), napi::code::kInternal,
              "tensor must be a contiguous CPU tensor before it reaches JavaScript");
  const c10::ScalarType type = source.scalar_type();
  Napi::Object result = Napi::Object::New(env);
  result.Set("dtype", NameOfScalarType(type));
  Napi::Array shape = Napi::Array::New(env, source.dim());
  for (int64_t i = 0; i < source.dim(); ++i) {
    shape.Set(static_cast<uint32_t>(i), Napi::Number::New(env, static_cast<double>(source.size(i))));
  }
  result.Set("shape", shape);

  const size_t bytes = source.nbytes();
  Napi::ArrayBuffer buffer;
  // Hand the memory over only when the caller's reference is the only one to this tensor and
  // its storage: an output that is (or views) a weight, or appears twice, is copied.
  const bool exclusive = source.use_count() == 1 && source.storage().use_count() == 1;
  if (exclusive && bytes > 0) {
    auto* holder = new at::Tensor(source);
    buffer = Napi::ArrayBuffer::New(env, holder->data_ptr(), bytes, FreeTensorHolder, holder);
  } else {
    buffer = Napi::ArrayBuffer::New(env, bytes);
    if (bytes > 0) std::memcpy(buffer.Data(), source.data_ptr(), bytes);
  }
  napi_value array;
  NAPI_THROW_IF_FAILED(env,
                       napi_create_typedarray(env, TypedArrayTypeOf(type),
                                              static_cast<size_t>(source.numel()), buffer, 0,
                                              &array),
                       result);
  result.Set("data", Napi::Value(env, array));
  return result;
}

}  // namespace kiln::torch_addon
