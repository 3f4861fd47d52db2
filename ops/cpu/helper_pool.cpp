#include "runnel/ops/cpu/helper_pool.hpp"

#include <algorithm>
#include <chrono>

#include "runnel/ops/core/float_env.hpp"
#include "runnel/ops/core/spin_wait.hpp"

namespace runnel {

namespace {

/// How long a caller spins for a helper's last chunk before it sleeps.
constexpr auto caller_spin = std::chrono::microseconds(20);
/// How long a keen idle helper polls before it sleeps, and after how much of it the polling
/// also yields its core.
constexpr auto helper_poll = std::chrono::microseconds(50);
constexpr auto helper_yield_after = std::chrono::microseconds(5);

} // namespace

void loop_job::work() {
  for (int64_t c = next_.fetch_add(1); c < chunks_; c = next_.fetch_add(1)) {
    int64_t b = c * per_, e = std::min(n_, b + per_);
    try {
      if (b < e)
        (*fn_)(b, e);
    } catch (...) {
      std::lock_guard lock(error_mu_);
      if (!error_)
        error_ = std::current_exception();
    }
    if (done_.fetch_add(1) + 1 == chunks_ && sleeping_.load())
      done_.notify_all();
  }
}

void loop_job::finish() {
  spin_for([&](size_t) { return done_.load(std::memory_order_acquire) >= chunks_; }, caller_spin);
  // Seen by the helper that finishes the last chunk after it counts it (both sequentially
  // consistent): it wakes this thread, or this thread sees its count before it sleeps.
  sleeping_.store(true);
  for (int64_t d = done_.load(); d < chunks_; d = done_.load())
    done_.wait(d);
  // Every chunk is done and no thread calls fn_ again: the error can leave the caller's frame.
  if (error_)
    std::rethrow_exception(error_);
}

helper_pool::helper_pool(int threads) {
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this] {
      flush_denormals_on_this_thread(); // as the kernels that hand them work do
      run();
    });
}

helper_pool::~helper_pool() {
  stop_.store(true);
  posted_.fetch_add(1);
  posted_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void helper_pool::post(const std::shared_ptr<loop_job>& job, int helpers) {
  {
    std::lock_guard lock(mu_);
    for (int h = 0; h < helpers; ++h)
      jobs_.push_back(job);
    pending_.fetch_add(helpers);
  }
  // After the count (sequentially consistent): a helper that counted itself a sleeper before
  // this sees the post or is woken; one that did not yet sees pending_ before it waits.
  // Each notify wakes one sleeper: no more are woken than there are helpers asked for.
  posted_.fetch_add(1);
  for (int h = std::min(helpers, sleepers_.load()); h > 0; --h)
    posted_.notify_one();
}

std::shared_ptr<loop_job> helper_pool::take() {
  if (pending_.load(std::memory_order_acquire) == 0)
    return nullptr;
  std::lock_guard lock(mu_);
  if (jobs_.empty())
    return nullptr;
  auto job = std::move(jobs_.front());
  jobs_.pop_front();
  pending_.fetch_sub(1);
  return job;
}

bool helper_pool::poll(uint32_t seen) {
  return spin_for([&](size_t) { return posted_.load(std::memory_order_acquire) != seen; },
                  helper_poll, helper_yield_after);
}

void helper_pool::run() {
  bool keen = false; // its last wait for work was short: poll before sleeping
  while (!stop_.load()) {
    uint32_t seen = posted_.load();
    if (auto job = take()) {
      job->work();
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    if (keen && poll(seen))
      continue;
    sleepers_.fetch_add(1);
    uint32_t now = posted_.load();
    if (pending_.load() == 0 && !stop_.load())
      posted_.wait(now);
    sleepers_.fetch_sub(1);
    keen = std::chrono::steady_clock::now() - start < 2 * helper_poll;
  }
}

} // namespace runnel
