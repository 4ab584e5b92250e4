// Records the LibTorch operators one forward runs on the calling thread, with their times:
// a per-operator profile, and the way tests observe what a toggle changed (oneDNN on runs
// aten::mkldnn_convolution, off does not).
#pragma once

#include <ATen/record_function.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::torch_addon {

struct OpRecord {
  std::string name;
  // Nesting depth: aten::conv2d (0) calls aten::convolution (1)…
  int32_t depth;
  // Wall time including nested operators, microseconds.
  double micros;
};

class OpRecorder {
 public:
  // Records only when `enabled`; otherwise costs nothing.
  explicit OpRecorder(bool enabled);
  ~OpRecorder();
  OpRecorder(const OpRecorder&) = delete;
  OpRecorder& operator=(const OpRecorder&) = delete;

  // The records so far (a bounded number; see kMaxRecords).
  std::vector<OpRecord> Take();

  static constexpr size_t kMaxRecords = 100000;

 private:
  friend struct OpRecorderCallbacks;
  bool enabled_;
  at::CallbackHandle handle_ = 0;
  int32_t depth_ = 0;
  std::vector<OpRecord> records_;
};

}  // namespace kiln::torch_addon
