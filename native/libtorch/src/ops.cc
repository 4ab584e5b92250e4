#include "ops.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "host_tensor.h"
#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"
#include "kiln/napi/promise_worker.h"
#include "runtime.h"
#include "tensor_wrap.h"

namespace kiln::torch_addon {
namespace {

using napi::code::kInvalidInput;
using OpFn = std::function<std::vector<at::Tensor>(const at::Tensor&)>;

// Largest side and element count resize may produce: a request cannot make Kiln allocate
// without bound.
constexpr int64_t kMaxResizeSide = 16384;
constexpr int64_t kMaxResizeElements = int64_t{1} << 28;

class OpWorker : public napi::PromiseWorker {
 public:
  OpWorker(Napi::Env env, const char* name, at::Tensor input, bool native, OpFn fn)
      : PromiseWorker(env, name), input_(std::move(input)), native_(native), fn_(std::move(fn)) {}

 private:
  void Run() override {
    RunOperatorsOnThisThreadAlone();
    c10::InferenceMode inference;
    outputs_ = fn_(input_);
    input_ = at::Tensor();
    if (!native_) {
      for (at::Tensor& output : outputs_) output = ToHostTensor(output);
    }
  }

  Napi::Value Result(Napi::Env env) override {
    auto convert = [&](const at::Tensor& t) -> Napi::Value {
      return native_ ? Napi::Value(TensorWrap::NewInstance(env, t)) : Napi::Value(TensorToJs(env, t));
    };
    if (outputs_.size() == 1) return convert(outputs_[0]);
    Napi::Array array = Napi::Array::New(env, outputs_.size());
    for (size_t i = 0; i < outputs_.size(); ++i) array.Set(static_cast<uint32_t>(i), convert(outputs_[i]));
    return array;
  }

  at::Tensor input_;
  bool native_;
  OpFn fn_;
  std::vector<at::Tensor> outputs_;
};

bool IsReducedFloat(c10::ScalarType type) {
  return type == c10::ScalarType::Half || type == c10::ScalarType::BFloat16;
}

// Half and bfloat16 kernels are missing on CPU in older LibTorch: compute those in float32.
at::Tensor Computable(const at::Tensor& t) {
  return IsReducedFloat(t.scalar_type()) ? t.to(at::kFloat) : t;
}

void RequireFloating(const at::Tensor& t, const char* op) {
  napi::Check(at::isFloatingType(t.scalar_type()), kInvalidInput,
              std::string(op) + " needs a floating-point tensor, not " +
                  c10::toString(t.scalar_type()));
}

int64_t WrapDim(int64_t dim, int64_t rank, const char* op) {
  const int64_t wrapped = dim < 0 ? dim + rank : dim;
  napi::Check(rank > 0 && wrapped >= 0 && wrapped < rank, kInvalidInput,
              std::string(op) + ": dim " + std::to_string(dim) + " is out of range for a rank-" +
                  std::to_string(rank) + " tensor");
  return wrapped;
}

std::vector<double> RequireNumbers(const Napi::Value& value, const std::string& what) {
  Napi::Array array = napi::RequireArray(value, what);
  std::vector<double> numbers;
  for (uint32_t i = 0; i < array.Length(); ++i) {
    numbers.push_back(napi::RequireNumber(array.Get(i), what + "[" + std::to_string(i) + "]"));
  }
  return numbers;
}

// Starts `fn` on the tensor given as the first argument.
Napi::Value StartOp(const Napi::CallbackInfo& info, const char* name, OpFn fn) {
  Napi::Value value = napi::Arg(info, 0);
  std::optional<at::Tensor> wrapped = TensorWrap::TensorOf(value);
  at::Tensor input;
  if (wrapped) {
    input = *wrapped;
  } else {
    napi::Check(IsJsTensor(value), kInvalidInput, std::string(name) + ": the first argument must be a tensor");
    input = TensorFromJs(value.As<Napi::Object>(), "tensor", false);
  }
  return (new OpWorker(info.Env(), name, std::move(input), wrapped.has_value(), std::move(fn)))->Start();
}

// softmax(x, dim)
Napi::Value Softmax(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  const int64_t dim = napi::RequireInt(napi::Arg(info, 1), "dim");
  return StartOp(info, "kiln.libtorch.softmax", [dim](const at::Tensor& x) {
    RequireFloating(x, "softmax");
    const int64_t d = WrapDim(dim, x.dim(), "softmax");
    return std::vector<at::Tensor>{at::softmax(Computable(x), d).to(x.scalar_type())};
  });
  KILN_NAPI_END_ASYNC(info.Env())
}

// topk(x, k, dim, largest) → [values, indices]
Napi::Value TopK(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  const int64_t k = napi::RequireInt(napi::Arg(info, 1), "k");
  const int64_t dim = napi::RequireInt(napi::Arg(info, 2), "dim");
  const bool largest = napi::RequireBool(napi::Arg(info, 3), "largest");
  return StartOp(info, "kiln.libtorch.topk", [=](const at::Tensor& x) {
    const int64_t d = WrapDim(dim, x.dim(), "topk");
    napi::Check(k >= 0 && k <= x.size(d), kInvalidInput,
                "topk: k=" + std::to_string(k) + " but the dimension has " +
                    std::to_string(x.size(d)) + " elements");
    auto [values, indices] = at::topk(Computable(x), k, d, largest, /*sorted=*/true);
    return std::vector<at::Tensor>{values.to(x.scalar_type()), indices};
  });
  KILN_NAPI_END_ASYNC(info.Env())
}

// argmax(x, dim, keepdim) → int64 indices
Napi::Value ArgMax(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  const int64_t dim = napi::RequireInt(napi::Arg(info, 1), "dim");
  const bool keepdim = napi::RequireBool(napi::Arg(info, 2), "keepdim");
  return StartOp(info, "kiln.libtorch.argmax", [=](const at::Tensor& x) {
    const int64_t d = WrapDim(dim, x.dim(), "argmax");
    napi::Check(x.size(d) > 0, kInvalidInput, "argmax of an empty dimension");
    return std::vector<at::Tensor>{at::argmax(Computable(x), d, keepdim)};
  });
  KILN_NAPI_END_ASYNC(info.Env())
}

// normalize(x, mean, std, dim): (x - mean[c]) / std[c] along the channel dim `dim`. Integer
// tensors (raw pixels) become float32; floating ones keep their type.
Napi::Value Normalize(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  std::vector<double> mean = RequireNumbers(napi::Arg(info, 1), "mean");
  std::vector<double> stddev = RequireNumbers(napi::Arg(info, 2), "std");
  const int64_t dim = napi::RequireInt(napi::Arg(info, 3), "dim");
  napi::Check(!mean.empty() && mean.size() == stddev.size(), kInvalidInput,
              "normalize: mean and std must be non-empty and of the same length");
  for (double s : stddev) napi::Check(s != 0, kInvalidInput, "normalize: std must not be 0");
  return StartOp(info, "kiln.libtorch.normalize", [=](const at::Tensor& x) {
    const int64_t d = WrapDim(dim, x.dim(), "normalize");
    const int64_t channels = static_cast<int64_t>(mean.size());
    napi::Check(channels == 1 || x.size(d) == channels, kInvalidInput,
                "normalize: " + std::to_string(channels) + " means for " +
                    std::to_string(x.size(d)) + " channels");
    const c10::ScalarType out_type =
        at::isFloatingType(x.scalar_type()) ? x.scalar_type() : c10::ScalarType::Float;
    std::vector<int64_t> shape(x.dim(), 1);
    shape[d] = channels;
    at::Tensor m = at::tensor(mean, at::kFloat).view(shape);
    at::Tensor s = at::tensor(stddev, at::kFloat).view(shape);
    return std::vector<at::Tensor>{((x.to(at::kFloat) - m) / s).to(out_type)};
  });
  KILN_NAPI_END_ASYNC(info.Env())
}

// resize(x, height, width, { mode, alignCorners, layout }): x is CHW/NCHW ("chw") or
// HWC/NHWC ("hwc"); mode is nearest, bilinear (default), bicubic or area. Integer images are
// resized in float32, then rounded and clamped back to their type.
Napi::Value Resize(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  const int64_t height = napi::RequireInt(napi::Arg(info, 1), "height");
  const int64_t width = napi::RequireInt(napi::Arg(info, 2), "width");
  napi::Check(height > 0 && width > 0 && height <= kMaxResizeSide && width <= kMaxResizeSide,
              kInvalidInput,
              "resize: height and width must be between 1 and " + std::to_string(kMaxResizeSide));
  std::string mode = "bilinear";
  std::string layout = "chw";
  bool align_corners = false;
  Napi::Value options_value = napi::Arg(info, 3);
  if (!napi::IsAbsent(options_value)) {
    Napi::Object options = napi::RequireObject(options_value, "resize options");
    mode = napi::OptionalString(options, "mode").value_or(mode);
    layout = napi::OptionalString(options, "layout").value_or(layout);
    align_corners = napi::OptionalBool(options, "alignCorners").value_or(false);
  }
  napi::Check(mode == "nearest" || mode == "bilinear" || mode == "bicubic" || mode == "area",
              kInvalidInput, "resize: unknown mode \"" + mode + "\" (nearest, bilinear, bicubic, area)");
  napi::Check(layout == "chw" || layout == "hwc", kInvalidInput,
              "resize: unknown layout \"" + layout + "\" (chw, hwc)");
  return StartOp(info, "kiln.libtorch.resize", [=](const at::Tensor& x) {
    napi::Check(x.dim() == 3 || x.dim() == 4, kInvalidInput,
                "resize needs a rank-3 or rank-4 image tensor, not rank " + std::to_string(x.dim()));
    const bool batched = x.dim() == 4;
    at::Tensor nchw = batched ? x : x.unsqueeze(0);
    if (layout == "hwc") nchw = nchw.permute({0, 3, 1, 2});
    napi::Check(nchw.size(0) * nchw.size(1) * height * width <= kMaxResizeElements, kInvalidInput,
                "resize: the result would be too large");
    at::Tensor input = nchw.to(at::kFloat);
    at::Tensor out;
    if (mode == "nearest") {
      out = at::upsample_nearest2d(input, {height, width});
    } else if (mode == "bilinear") {
      out = at::upsample_bilinear2d(input, {height, width}, align_corners);
    } else if (mode == "bicubic") {
      out = at::upsample_bicubic2d(input, {height, width}, align_corners);
    } else {
      out = at::adaptive_avg_pool2d(input, {height, width});
    }
    if (!at::isFloatingType(x.scalar_type())) {
      out = out.round();
      // Bicubic overshoots; pixels must stay in their type's range.
      if (x.scalar_type() == c10::ScalarType::Byte) out = out.clamp(0, 255);
      if (x.scalar_type() == c10::ScalarType::Char) out = out.clamp(-128, 127);
    }
    out = out.to(x.scalar_type());
    if (layout == "hwc") out = out.permute({0, 2, 3, 1});
    if (!batched) out = out.squeeze(0);
    return std::vector<at::Tensor>{out.contiguous()};
  });
  KILN_NAPI_END_ASYNC(info.Env())
}

}  // namespace

Napi::Object CreateOps(Napi::Env env) {
  Napi::Object ops = Napi::Object::New(env);
  ops.Set("softmax", Napi::Function::New(env, Softmax, "softmax"));
  ops.Set("topk", Napi::Function::New(env, TopK, "topk"));
  ops.Set("argmax", Napi::Function::New(env, ArgMax, "argmax"));
  ops.Set("normalize", Napi::Function::New(env, Normalize, "normalize"));
  ops.Set("resize", Napi::Function::New(env, Resize, "resize"));
  return ops;
}

}  // namespace kiln::torch_addon
