#include "op_recorder.h"

#include <chrono>
#include <memory>

namespace kiln::torch_addon {
namespace {

using Clock = std::chrono::steady_clock;

// RecordFunction callbacks are plain function pointers: the active recorder of each thread
// is found through this thread-local.
thread_local OpRecorder* t_active = nullptr;

struct OpTiming : at::ObserverContext {
  size_t index = 0;
  Clock::time_point start;
};

}  // namespace

struct OpRecorderCallbacks {
  static std::unique_ptr<at::ObserverContext> Start(const at::RecordFunction& fn) {
    OpRecorder* recorder = t_active;
    if (recorder == nullptr || recorder->records_.size() >= OpRecorder::kMaxRecords) {
      return nullptr;
    }
    auto timing = std::make_unique<OpTiming>();
    timing->index = recorder->records_.size();
    recorder->records_.push_back({fn.name(), recorder->depth_, 0.0});
    ++recorder->depth_;
    timing->start = Clock::now();
    return timing;
  }

  static void End(const at::RecordFunction&, at::ObserverContext* context) {
    OpRecorder* recorder = t_active;
    if (recorder == nullptr || context == nullptr) return;
    auto* timing = static_cast<OpTiming*>(context);
    --recorder->depth_;
    recorder->records_[timing->index].micros =
        std::chrono::duration<double, std::micro>(Clock::now() - timing->start).count();
  }
};

OpRecorder::OpRecorder(bool enabled) : enabled_(enabled) {
  if (!enabled_) return;
  t_active = this;
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&OpRecorderCallbacks::Start, &OpRecorderCallbacks::End)
          .scopes({at::RecordScope::FUNCTION}));
}

OpRecorder::~OpRecorder() {
  if (!enabled_) return;
  at::removeCallback(handle_);
  t_active = nullptr;
}

std::vector<OpRecord> OpRecorder::Take() { return std::move(records_); }

}  // namespace kiln::torch_addon
