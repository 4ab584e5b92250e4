// Host/device copies of a forward's tensors. On a GPU they are queued without waiting (from
// and into page-locked host memory) on the current stream, which DeviceStreamScope makes a
// side stream; the caller synchronizes that stream once for all of them.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace kiln::torch_addon {

// `tensor` on `device`; the same tensor when it is already there.
at::Tensor UploadAsync(const at::Tensor& tensor, const c10::Device& device);

// `tensor` as a contiguous CPU tensor; for GPU tensors the copy may still be in flight.
at::Tensor DownloadAsync(const at::Tensor& tensor);

}  // namespace kiln::torch_addon
