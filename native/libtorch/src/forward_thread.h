// ForwardThread: the one thread an execution context runs its forwards on.
//
// Forwards start from libuv's pool (PromiseWorker), whose threads take jobs in turn; a model
// run from a different thread each time runs with a different OpenMP team each time, which
// measured 5-13% slower on ResNet-18 at batch 1 than one thread throughout. So the pool thread
// hands the forward to the context's own thread and waits for it: each execution context
// (Triton's model instance) keeps one thread, one OpenMP team and warm per-thread state.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace kiln::torch_addon {

class ForwardThread {
 public:
  ForwardThread();
  // Lets queued work finish, then joins the thread.
  ~ForwardThread();
  ForwardThread(const ForwardThread&) = delete;
  ForwardThread& operator=(const ForwardThread&) = delete;

  // Runs `fn` on this thread and waits for it; rethrows whatever `fn` threw.
  void Call(const std::function<void()>& fn);

 private:
  void Loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// Runs `fn` on a thread of its own that ends with it, and waits; rethrows whatever `fn` threw.
//
// OpenMP keeps a team for every thread that ever ran a parallel region, for as long as that
// thread lives, and libgomp counts all their threads: once they outnumber the cores, every team
// sleeps between parallel regions instead of spinning, and each forward then waits dozens of
// times for its teammates to wake (ResNet-18 at batch 1 on two cores: ~1.5x slower). Work
// with parallel regions that is not an execution context's (loading: freezing and pre-packing
// weights; a module's own forward) runs here, not on a libuv thread that lives on with a team.
void RunOnPassingThread(const std::function<void()>& fn);

}  // namespace kiln::torch_addon
