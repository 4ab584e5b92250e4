#include "device_stream.h"

#include "kiln/napi/errors.h"

#if defined(KILN_WITH_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#endif

namespace kiln::torch_addon {

#if defined(KILN_WITH_CUDA)

struct DeviceStreamScope::Impl {
  explicit Impl(c10::cuda::CUDAStream pooled) : stream(pooled), guard(pooled) {}
  c10::cuda::CUDAStream stream;
  c10::cuda::CUDAStreamGuard guard;
};

DeviceStreamScope::DeviceStreamScope(const c10::Device& device) {
  if (!device.is_cuda()) return;
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  impl_ = std::make_unique<Impl>(c10::cuda::getStreamFromPool(false, index));
}

void DeviceStreamScope::Synchronize() {
  if (impl_) impl_->stream.synchronize();
}

#else

struct DeviceStreamScope::Impl {};

DeviceStreamScope::DeviceStreamScope(const c10::Device& device) {
  napi::Check(!device.is_cuda(), napi::code::kInvalidConfig,
              "this addon was built against a CPU-only LibTorch");
}

void DeviceStreamScope::Synchronize() {}

#endif

DeviceStreamScope::~DeviceStreamScope() = default;

}  // namespace kiln::torch_addon
