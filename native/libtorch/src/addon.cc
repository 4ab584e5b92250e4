#include "addon.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "context_wrap.h"
#include "dtypes.h"
#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"
#include "module_wrap.h"
#include "ops.h"
#include "runtime.h"
#include "tensor_wrap.h"

namespace kiln::torch_addon {

LibTorchAddon::LibTorchAddon(Napi::Env env, Napi::Object exports) {
  module_constructor = Napi::Persistent(ModuleWrap::Define(env));
  context_constructor = Napi::Persistent(ContextWrap::Define(env));
  tensor_constructor = Napi::Persistent(TensorWrap::Define(env));
  DefineAddon(exports, {
                           InstanceValue("ModuleWrap", module_constructor.Value(), napi_enumerable),
                           InstanceValue("ContextWrap", context_constructor.Value(), napi_enumerable),
                           InstanceValue("TensorWrap", tensor_constructor.Value(), napi_enumerable),
                           InstanceValue("ops", CreateOps(env), napi_enumerable),
                           InstanceMethod<&LibTorchAddon::RuntimeInfo>("runtimeInfo"),
                           InstanceMethod<&LibTorchAddon::GetGlobals>("getGlobals"),
                           InstanceMethod<&LibTorchAddon::SetGlobals>("setGlobals"),
                       });
}

Napi::Value LibTorchAddon::RuntimeInfo(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  Napi::Env env = info.Env();
  Napi::Object result = Napi::Object::New(env);
  result.Set("version", TORCH_VERSION);
  result.Set("cudaCompiled", CompiledWithCuda());
  const bool cuda = CompiledWithCuda() && torch::cuda::is_available();
  result.Set("cudaAvailable", cuda);
  result.Set("cudaDeviceCount", Napi::Number::New(env, cuda ? static_cast<double>(torch::cuda::device_count()) : 0));
  result.Set("cudnnAvailable", cuda && torch::cuda::cudnn_is_available());
  result.Set("mkldnnAvailable", at::hasMKLDNN());
  result.Set("openmp", at::hasOpenMP());
  result.Set("mkl", at::hasMKL());
  Napi::Array dtypes = Napi::Array::New(env);
  for (const std::string& name : SupportedDTypeNames()) dtypes.Set(dtypes.Length(), name);
  result.Set("dtypes", dtypes);
  result.Set("buildConfig", at::show_config());
  result.Set("parallelInfo", at::get_parallel_info());
  return result;
  KILN_NAPI_END(info.Env())
}

Napi::Value LibTorchAddon::GetGlobals(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  Napi::Env env = info.Env();
  const BackendState backend = ReadBackendState();
  Napi::Object result = Napi::Object::New(env);
  result.Set("mkldnn", backend.mkldnn);
  result.Set("cudnn", backend.cudnn);
  result.Set("cudnnBenchmark", backend.cudnn_benchmark);
  result.Set("numThreads", at::get_num_threads());
  result.Set("numInteropThreads", at::get_num_interop_threads());
  result.Set("graphOptimizer", torch::jit::getGraphExecutorOptimize());
  return result;
  KILN_NAPI_END(info.Env())
}

Napi::Value LibTorchAddon::SetGlobals(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  Napi::Object options = napi::RequireObject(napi::Arg(info, 0), "globals");
  BackendFlags flags;
  flags.mkldnn = napi::OptionalBool(options, "mkldnn");
  flags.cudnn = napi::OptionalBool(options, "cudnn");
  flags.cudnn_benchmark = napi::OptionalBool(options, "cudnnBenchmark");
  if (auto threads = napi::OptionalInt(options, "numInteropThreads")) SetInterOpThreads(*threads);
  if (auto threads = napi::OptionalInt(options, "numThreads")) SetIntraOpThreads(*threads);
  ApplyBackendFlags(flags);
  return info.Env().Undefined();
  KILN_NAPI_END(info.Env())
}

}  // namespace kiln::torch_addon

using KilnLibTorchAddon = kiln::torch_addon::LibTorchAddon;
NODE_API_NAMED_ADDON(kiln_libtorch, KilnLibTorchAddon)
