#include "values.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>

#include <cmath>
#include <vector>

#include "host_tensor.h"
#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"
#include "tensor_wrap.h"

namespace kiln::torch_addon {
namespace {

using napi::code::kInvalidInput;
using napi::code::kUnsupportedFormat;

at::Tensor TensorArg(const Napi::Value& value, const std::string& what, bool pinned) {
  if (auto wrapped = TensorWrap::TensorOf(value)) return *wrapped;
  napi::Check(IsJsTensor(value), kInvalidInput,
              what + " must be a tensor ({ dtype, shape, data } or a native tensor)");
  return TensorFromJs(value.As<Napi::Object>(), what, pinned);
}

// The TorchScript type a JavaScript value has when the model does not say (Any, unions).
c10::TypePtr InferType(const Napi::Value& value) {
  if (value.IsBoolean()) return c10::BoolType::get();
  if (value.IsNumber()) {
    double number = value.As<Napi::Number>().DoubleValue();
    return std::floor(number) == number && std::fabs(number) < 9007199254740992.0
               ? c10::TypePtr(c10::IntType::get())
               : c10::TypePtr(c10::FloatType::get());
  }
  if (value.IsBigInt()) return c10::IntType::get();
  if (value.IsString()) return c10::StringType::get();
  if (napi::IsAbsent(value)) return c10::NoneType::get();
  if (value.IsArray()) {
    Napi::Array array = value.As<Napi::Array>();
    std::vector<c10::TypePtr> elements;
    for (uint32_t i = 0; i < array.Length(); ++i) elements.push_back(InferType(array.Get(i)));
    return c10::TupleType::create(std::move(elements));
  }
  if (TensorWrap::TensorOf(value) || IsJsTensor(value)) return c10::TensorType::get();
  if (value.IsObject()) {
    Napi::Object object = value.As<Napi::Object>();
    Napi::Array names = object.GetPropertyNames();
    c10::TypePtr value_type =
        names.Length() > 0 ? InferType(object.Get(names.Get(0u))) : c10::TensorType::get();
    return c10::DictType::create(c10::StringType::get(), value_type);
  }
  throw napi::NativeError(kInvalidInput, "unsupported JavaScript value");
}

c10::IValue DictFromJs(const Napi::Value& value, const c10::DictType& type,
                       const std::string& what, bool pinned) {
  napi::Check(type.getKeyType()->kind() == c10::TypeKind::StringType, kInvalidInput,
              what + ": only dicts keyed by str can come from JavaScript (the model declares " +
                  type.str() + ")");
  Napi::Object object = napi::RequireObject(value, what);
  c10::impl::GenericDict dict(type.getKeyType(), type.getValueType());
  Napi::Array names = object.GetPropertyNames();
  for (uint32_t i = 0; i < names.Length(); ++i) {
    std::string key = names.Get(i).ToString().Utf8Value();
    dict.insert(key, ValueFromJs(object.Get(key), type.getValueType(), what + "." + key, pinned));
  }
  return dict;
}

}  // namespace

c10::IValue ValueFromJs(const Napi::Value& value, const c10::TypePtr& type,
                        const std::string& what, bool pinned) {
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
      return TensorArg(value, what, pinned);
    case c10::TypeKind::OptionalType:
      if (napi::IsAbsent(value)) return c10::IValue();
      return ValueFromJs(value, type->expectRef<c10::OptionalType>().getElementType(), what,
                         pinned);
    case c10::TypeKind::NoneType:
      napi::Check(napi::IsAbsent(value), kInvalidInput, what + " must be null");
      return c10::IValue();
    case c10::TypeKind::IntType:
      return c10::IValue(napi::RequireInt(value, what));
    case c10::TypeKind::FloatType:
      return c10::IValue(napi::RequireNumber(value, what));
    case c10::TypeKind::NumberType:
      return value.IsNumber() || value.IsBigInt() ? ValueFromJs(value, InferType(value), what, pinned)
                                                 : c10::IValue(napi::RequireNumber(value, what));
    case c10::TypeKind::BoolType:
      return c10::IValue(napi::RequireBool(value, what));
    case c10::TypeKind::StringType:
      return c10::IValue(napi::RequireString(value, what));
    case c10::TypeKind::TupleType: {
      const auto& elements = type->expectRef<c10::TupleType>().elements();
      Napi::Array array = napi::RequireArray(value, what);
      napi::Check(array.Length() == elements.size(), kInvalidInput,
                  what + " must hold " + std::to_string(elements.size()) + " values, not " +
                      std::to_string(array.Length()));
      std::vector<c10::IValue> items;
      items.reserve(elements.size());
      for (uint32_t i = 0; i < array.Length(); ++i) {
        items.push_back(
            ValueFromJs(array.Get(i), elements[i], what + "[" + std::to_string(i) + "]", pinned));
      }
      return c10::ivalue::Tuple::create(std::move(items));
    }
    case c10::TypeKind::ListType: {
      const c10::TypePtr element = type->expectRef<c10::ListType>().getElementType();
      Napi::Array array = napi::RequireArray(value, what);
      c10::impl::GenericList list(element);
      list.reserve(array.Length());
      for (uint32_t i = 0; i < array.Length(); ++i) {
        list.push_back(
            ValueFromJs(array.Get(i), element, what + "[" + std::to_string(i) + "]", pinned));
      }
      return list;
    }
    case c10::TypeKind::DictType:
      return DictFromJs(value, type->expectRef<c10::DictType>(), what, pinned);
    case c10::TypeKind::AnyType:
    case c10::TypeKind::UnionType:
      return ValueFromJs(value, InferType(value), what, pinned);
    default:
      throw napi::NativeError(kUnsupportedFormat, what + ": values of TorchScript type " +
                                                      type->str() +
                                                      " cannot be passed from JavaScript");
  }
}

c10::IValue MapTensors(const c10::IValue& value,
                       const std::function<at::Tensor(const at::Tensor&)>& fn) {
  if (value.isTensor()) return fn(value.toTensor());
  if (value.isTuple()) {
    std::vector<c10::IValue> items;
    for (const auto& item : value.toTupleRef().elements()) items.push_back(MapTensors(item, fn));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (value.isList()) {
    c10::impl::GenericList source = value.toList();
    c10::impl::GenericList list(source.elementType());
    list.reserve(source.size());
    for (const c10::IValue& item : source) list.push_back(MapTensors(item, fn));
    return list;
  }
  if (value.isGenericDict()) {
    c10::impl::GenericDict source = value.toGenericDict();
    c10::impl::GenericDict dict(source.keyType(), source.valueType());
    for (const auto& entry : source) dict.insert(entry.key(), MapTensors(entry.value(), fn));
    return dict;
  }
  return value;
}

Napi::Value ValueToJs(Napi::Env env, const c10::IValue& value, bool native_tensors) {
  if (value.isTensor()) {
    return native_tensors ? Napi::Value(TensorWrap::NewInstance(env, value.toTensor()))
                          : Napi::Value(TensorToJs(env, value.toTensor()));
  }
  if (value.isTuple() || value.isList()) {
    std::vector<c10::IValue> items = value.isTuple() ? value.toTupleRef().elements().vec()
                                                     : value.toList().vec();
    Napi::Array array = Napi::Array::New(env, items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      array.Set(static_cast<uint32_t>(i), ValueToJs(env, items[i], native_tensors));
    }
    return array;
  }
  if (value.isGenericDict()) {
    Napi::Object object = Napi::Object::New(env);
    for (const auto& entry : value.toGenericDict()) {
      const c10::IValue& key = entry.key();
      std::string name;
      if (key.isString()) {
        name = key.toStringRef();
      } else if (key.isInt()) {
        name = std::to_string(key.toInt());
      } else {
        throw napi::NativeError(kUnsupportedFormat, "dict keys of type " + key.tagKind() +
                                                        " have no JavaScript form");
      }
      object.Set(name, ValueToJs(env, entry.value(), native_tensors));
    }
    return object;
  }
  if (value.isInt()) {
    int64_t number = value.toInt();
    if (std::llabs(number) <= 9007199254740991LL) return Napi::Number::New(env, static_cast<double>(number));
    return Napi::BigInt::New(env, number);
  }
  if (value.isDouble()) return Napi::Number::New(env, value.toDouble());
  if (value.isBool()) return Napi::Boolean::New(env, value.toBool());
  if (value.isString()) return Napi::String::New(env, value.toStringRef());
  if (value.isNone()) return env.Null();
  throw napi::NativeError(kUnsupportedFormat, "outputs of TorchScript type " + value.tagKind() +
                                                  " have no JavaScript form");
}

}  // namespace kiln::torch_addon
