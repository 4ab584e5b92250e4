#include "forward_thread.h"

#include <exception>
#include <utility>

namespace kiln::torch_addon {

ForwardThread::ForwardThread() : thread_([this] { Loop(); }) {}

ForwardThread::~ForwardThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void ForwardThread::Call(const std::function<void()>& fn) {
  std::packaged_task<void()> task(fn);
  std::future<void> done = task.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
  done.get();
}

void ForwardThread::Loop() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void RunOnPassingThread(const std::function<void()>& fn) {
  std::exception_ptr failure;
  std::thread thread([&] {
    try {
      fn();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace kiln::torch_addon
