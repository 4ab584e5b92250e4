// Where a forward's copies and kernels run on a GPU: a stream from LibTorch's pool rather than
// the default stream, so uploads, compute and downloads of concurrent forwards overlap.
// On CPU devices, and in builds against a CPU-only LibTorch, this does nothing.
#pragma once

#include <c10/core/Device.h>

#include <memory>

namespace kiln::torch_addon {

class DeviceStreamScope {
 public:
  explicit DeviceStreamScope(const c10::Device& device);
  ~DeviceStreamScope();
  DeviceStreamScope(const DeviceStreamScope&) = delete;
  DeviceStreamScope& operator=(const DeviceStreamScope&) = delete;

  // Waits until everything queued on the stream (asynchronous downloads included) is done.
  void Synchronize();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::torch_addon
