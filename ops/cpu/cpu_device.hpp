#pragma once
// The CPU device's intra-op threads (ops/cpu/helper_pool.hpp, behind a small interface).
//
//   cpu.parallel_for(n, /*grain=*/16384, [&](int64_t begin, int64_t end) { ... });
//
// parallel_for splits [0, n) into chunks of at least `grain` items, handed out in turn to the
// calling thread and the pool's, and returns once every chunk is done: never later because a
// pool thread is busy elsewhere (the caller then runs the chunks itself). Small ranges run
// inline.

#include <cstdint>
#include <string>
#include <functional>
#include <memory>

namespace runnel {

class cpu_device {
public:
  /// `threads` < 0: one per core; 0: no pool (parallel_for runs on the calling thread).
  explicit cpu_device(int threads = -1);
  ~cpu_device();
  cpu_device(const cpu_device&) = delete;
  cpu_device& operator=(const cpu_device&) = delete;

  int num_threads() const;
  /// fn(begin, end) over [0, n) (see above). A range of one chunk runs here, inline, before
  /// anything is built for the pool: a tiny kernel (a scalar Add) paid ~60 ns a node for the
  /// out-of-line call and its std::function (core_bench node_overhead).
  template <class F> void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0)
      return;
    int64_t chunks = chunks_for(n, grain);
    if (chunks <= 1) {
      fn(int64_t(0), n);
      return;
    }
    run_chunks(n, chunks, std::function<void(int64_t, int64_t)>(std::ref(fn)));
  }

private:
  /// Several chunks per worker (the pool's threads and the caller), handed out dynamically: a
  /// descheduled thread (other work shares these cores) then delays only its current chunk, not
  /// a fixed share of the range. One when there is no pool.
  int64_t chunks_for(int64_t n, int64_t grain) const {
    if (threads_ <= 0)
      return 1;
    int64_t most = int64_t(threads_ + 1) * 4;
    int64_t fit = n / (grain > 1 ? grain : 1);
    return fit < most ? fit : most;
  }
  void run_chunks(int64_t n, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn);

  struct impl;
  int threads_ = 0;
  std::unique_ptr<impl> impl_;
};

/// Sets OpenBLAS's thread count for the whole process (1: each call runs on its caller's thread,
/// and kernels parallelise through their device's pool instead). Returns the previous count.
int set_blas_threads(int threads);
/// OpenBLAS's thread count now.
int blas_threads();

/// C[m,n] = alpha·op(A)·op(B) + beta·C in float32, row-major, with C split into blocks of rows
/// or of columns over `pool` (null: the calling thread) when OpenBLAS runs one thread per call,
/// as it does under a runtime: the device's pool is then the only threads its kernels use. The
/// blocks run through sgemm_library().
void parallel_sgemm(cpu_device* pool, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                    int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc);

/// Elements per second one thread computes tanh over a cache-resident float32 array with the
/// Tanh kernel's own code (the cost model's rate for transcendental element-wise ops).
double measure_transcendental_rate();

/// What runs float32 products (parallel_sgemm): "oneDNN" on CPUs with AVX-512, whose sgemm
/// measured 5-26% faster on g2p than OpenBLAS's kernels for the CPU and level on the MLP; else
/// "OpenBLAS <core>", which beat oneDNN limited to AVX2 (docs/performance.md). RUNNEL_SGEMM=
/// openblas or onednn chooses either where oneDNN is built in.
std::string sgemm_library();

/// The kernel set OpenBLAS chose for this CPU ("SkylakeX", "Haswell", "Prescott", ...).
std::string blas_core();
/// When OpenBLAS fell back to a generic kernel set on a CPU that supports a better one (a VM
/// whose CPUID hides the CPU model makes OpenBLAS 0.3.21 pick "Prescott", SSE3, on AVX-512
/// cores: matrix products run 2-5x slower), the OPENBLAS_CORETYPE value to use ("SkylakeX" or
/// "Haswell"); else empty. OpenBLAS reads that variable once, when it is loaded.
std::string blas_core_suggestion();
/// For programs' main: when OPENBLAS_CORETYPE is unset and blas_core_suggestion() names a
/// better kernel set, sets the variable and re-executes the program with the same arguments
/// (returns only if that is not needed or fails).
void reexec_with_better_blas_core(char** argv);

} // namespace runnel
