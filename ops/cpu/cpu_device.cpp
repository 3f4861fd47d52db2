#include "ops/cpu/cpu_device.hpp"

#define EIGEN_USE_THREADS
#include <atomic>
#include <thread>
#include <unsupported/Eigen/CXX11/ThreadPool>

namespace runnel {

struct cpu_device::impl {
  explicit impl(int threads) : pool(threads) {}
  Eigen::ThreadPool pool;
};

cpu_device::cpu_device(int threads) {
  if (threads <= 0)
    threads = int(std::max(1u, std::thread::hardware_concurrency()));
  impl_ = std::make_unique<impl>(threads);
}

cpu_device::~cpu_device() = default;

int cpu_device::num_threads() const { return impl_->pool.NumThreads(); }

void cpu_device::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(n / grain, num_threads() + 1);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
  Eigen::Barrier barrier(static_cast<unsigned>(chunks - 1));
  for (int64_t c = 1; c < chunks; ++c) {
    int64_t b = c * per, e = std::min(n, b + per);
    impl_->pool.Schedule([&fn, &barrier, b, e] {
      if (b < e)
        fn(b, e);
      barrier.Notify();
    });
  }
  fn(0, std::min(n, per));
  barrier.Wait();
}

} // namespace runnel
