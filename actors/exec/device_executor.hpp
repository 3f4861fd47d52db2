#pragma once
// A device's exclusive compute budget: a fixed set of threads that run the device's kernels, so
// that virtual devices sharing a machine compete like real ones (two devices of one core each run
// two kernels at once; one device runs them one after the other). Node actors keep doing the
// bookkeeping on the actor scheduler and hand expensive kernels here.
//
//   device_executor ex("cpu:1", 1);
//   ex.post([] { /* compute a kernel, then emit its outputs */ });
//
// Tasks run in the order posted. Idle threads spin briefly before sleeping: waking a sleeping
// thread costs tens of microseconds on our VMs, which a chain of small kernels would pay per node.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace runnel {

class device_executor {
public:
  using task = std::function<void()>;
  device_executor(std::string name, int threads);
  /// Runs the tasks already posted, then joins the threads.
  ~device_executor();
  device_executor(const device_executor&) = delete;
  device_executor& operator=(const device_executor&) = delete;

  void post(task t);
  int num_threads() const { return int(threads_.size()); }
  const std::string& name() const { return name_; }

private:
  void loop();

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<task> tasks_;
  int sleeping_ = 0;
  std::atomic<size_t> queued_{0};    ///< tasks_.size(), for spinning threads to poll
  std::atomic<bool> stopping_{false};
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

} // namespace runnel
