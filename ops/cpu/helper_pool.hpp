#pragma once
// The CPU device's helper threads (cpu_device::parallel_for, ops/cpu/cpu_device.cpp) and the
// chunks of one parallel loop that its caller and they share.
//
//   auto job = std::make_shared<loop_job>(n, chunks, fn);
//   pool.post(job, helpers);   // helpers join when they can
//   job->work();               // the caller takes chunks too
//   job->finish();             // waits for every chunk handed out; rethrows a chunk's error

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace runnel {

/// One parallel loop's chunks, handed out in turn to its caller and the helpers it asked for.
/// The caller waits for the chunks to be done, not for the helpers to have run: one the cores
/// have no room for yet would otherwise hold the caller until it is scheduled, though the
/// caller ran every chunk itself. A helper that starts late finds none left, and the job,
/// shared, outlives the call for it.
class loop_job {
public:
  /// `fn` must outlive finish().
  loop_job(int64_t n, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn)
      : n_(n), chunks_(chunks), per_((n + chunks - 1) / chunks), fn_(&fn) {}

  /// Runs chunks until none is left.
  void work();
  /// Returns once every chunk is done (spinning a little for a helper's last one before it
  /// sleeps); then rethrows the first exception a chunk threw.
  void finish();

private:
  const int64_t n_, chunks_, per_;
  const std::function<void(int64_t, int64_t)>* fn_; // called only while chunks remain
  std::atomic<int64_t> next_{0}, done_{0};
  std::atomic<bool> sleeping_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

/// Threads that join loop jobs. An idle helper whose last wait for work was short polls for
/// the next job before it sleeps (yielding its core past the first few µs, as the runtime's
/// workers do): an RNN's products, one kernel after another, then find it awake, where waking
/// a sleeping one costs a futex call and tens of µs before it runs. One whose wait was long
/// sleeps at once, and costs nothing between steps that come seldom.
class helper_pool {
public:
  explicit helper_pool(int threads);
  ~helper_pool();
  helper_pool(const helper_pool&) = delete;
  helper_pool& operator=(const helper_pool&) = delete;

  /// Asks `helpers` threads to join `job`.
  void post(const std::shared_ptr<loop_job>& job, int helpers);

private:
  std::shared_ptr<loop_job> take();
  bool poll(uint32_t seen);
  void run();

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::deque<std::shared_ptr<loop_job>> jobs_;
  std::atomic<int64_t> pending_{0}; // jobs_.size(), read without the lock
  // Counts posts: what idle helpers poll and wait on. 32 bits, so that waiting on it is a
  // futex of its own (libstdc++ waits on wider atomics through a shared proxy, whose
  // notify_one wakes every waiter).
  std::atomic<uint32_t> posted_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

} // namespace runnel
