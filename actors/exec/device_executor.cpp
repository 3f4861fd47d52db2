#include "runnel/actors/exec/device_executor.hpp"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace runnel {

device_executor::device_executor(std::string name, int threads) : name_(std::move(name)) {
  threads = std::max(1, threads);
  threads_.reserve(size_t(threads));
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this] { loop(); });
}

device_executor::~device_executor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    stopping_.store(true);
  }
  cv_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void device_executor::post(task t) {
  bool wake;
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(t));
    queued_.fetch_add(1, std::memory_order_release);
    wake = sleeping_ > 0;
  }
  if (wake)
    cv_.notify_one();
}

void device_executor::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (tasks_.empty() && !stop_) {
      // Spin for a few microseconds without the lock: the next kernel of a chain usually comes
      // right after the previous one finishes.
      lock.unlock();
      auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(30);
      for (int i = 1;; ++i) {
#if defined(__x86_64__)
        _mm_pause();
#endif
        if (queued_.load(std::memory_order_acquire) > 0 || stopping_.load(std::memory_order_relaxed))
          break;
        if ((i & 31) == 0 && std::chrono::steady_clock::now() > deadline)
          break;
      }
      lock.lock();
      while (tasks_.empty() && !stop_) {
        ++sleeping_;
        cv_.wait(lock);
        --sleeping_;
      }
    }
    if (tasks_.empty())
      return; // stopping, nothing left
    task t = std::move(tasks_.front());
    tasks_.pop_front();
    queued_.fetch_sub(1, std::memory_order_relaxed);
    lock.unlock();
    t();
    t = nullptr; // release what the task holds outside the lock
    lock.lock();
  }
}

} // namespace runnel
