#include "device_copies.h"

#include <ATen/ATen.h>

namespace kiln::torch_addon {

at::Tensor UploadAsync(const at::Tensor& tensor, const c10::Device& device) {
  if (tensor.device() == device) return tensor;
  return tensor.to(device, /*non_blocking=*/true);
}

at::Tensor DownloadAsync(const at::Tensor& tensor) {
  if (tensor.device().is_cpu()) return tensor.contiguous();
  at::Tensor host =
      at::empty(tensor.sizes(), tensor.options().device(c10::kCPU).pinned_memory(true));
  host.copy_(tensor, /*non_blocking=*/true);
  return host;
}

}  // namespace kiln::torch_addon
