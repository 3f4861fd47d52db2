#include "runnel/ops/cpu/cpu_device.hpp"

#include <cblas.h>

#define EIGEN_USE_THREADS
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <unsupported/Eigen/CXX11/ThreadPool>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "runnel/ops/core/float_env.hpp"

namespace runnel {

namespace {

/// Eigen's threads, flushing denormals to zero as the kernels that hand them work do
/// (ops/core/float_env.hpp).
struct flushing_environment : Eigen::StlThreadEnvironment {
  EnvThread* CreateThread(std::function<void()> f) {
    return new EnvThread([f = std::move(f)] {
      flush_denormals_on_this_thread();
      f();
    });
  }
};

/// One parallel_for's chunks, handed out in turn to its caller and the helpers it asked for. The
/// caller waits for the chunks to be done, not for the helpers to have run: one that the cores
/// have no room for yet would otherwise hold the caller until it is scheduled, though the
/// caller ran every chunk itself. A helper that starts late finds none left, and the job, shared,
/// outlives the call for it. The caller spins a little for a helper's last chunk before it
/// sleeps (a futex sleep and wake-up cost tens of µs on our VMs). g2p, alternating runs
/// (2026-12-04): half the context switches (53k to 28k in 150 steps) and 3-9% more words/s than
/// with an Eigen::Barrier that waited for every helper; a spin of 0 or 60 µs measured no better.
struct loop_job {
  int64_t n = 0, chunks = 0, per = 0;
  const std::function<void(int64_t, int64_t)>* fn = nullptr; // called only while chunks remain
  std::atomic<int64_t> next{0}, done{0};
  std::atomic<bool> sleeping{false};
  std::mutex error_mu;
  std::exception_ptr error; // the first chunk's that threw, rethrown to the caller

  void work() {
    for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
      int64_t b = c * per, e = std::min(n, b + per);
      try {
        if (b < e)
          (*fn)(b, e);
      } catch (...) {
        std::lock_guard lock(error_mu);
        if (!error)
          error = std::current_exception();
      }
      if (done.fetch_add(1) + 1 == chunks && sleeping.load())
        done.notify_all();
    }
  }

  void wait() {
    auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
    for (int i = 0; done.load(std::memory_order_acquire) < chunks; ++i) {
      if (i % 16 == 15 && std::chrono::steady_clock::now() > spin_until)
        break;
#if defined(__x86_64__)
      _mm_pause();
#endif
    }
    // Seen by the helper that finishes the last chunk after it counts it (both sequentially
    // consistent): it wakes this thread, or this thread sees its count before it sleeps.
    sleeping.store(true);
    for (int64_t d = done.load(); d < chunks; d = done.load())
      done.wait(d);
  }
};

} // namespace

struct cpu_device::impl {
  explicit impl(int threads) : pool(threads) {}
  Eigen::ThreadPoolTempl<flushing_environment> pool;
};

cpu_device::cpu_device(int threads) {
  if (threads < 0)
    threads = int(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = threads;
  if (threads > 0)
    impl_ = std::make_unique<impl>(threads);
}

cpu_device::~cpu_device() = default;

int cpu_device::num_threads() const {
  return threads_;
}

int set_blas_threads(int threads) {
  int before = openblas_get_num_threads();
  openblas_set_num_threads(threads);
  return before;
}

int blas_threads() {
  return openblas_get_num_threads();
}

void parallel_sgemm(cpu_device* pool, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                    int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0)
    return;
  auto ta = transpose_a ? CblasTrans : CblasNoTrans, tb = transpose_b ? CblasTrans : CblasNoTrans;
  // The block C[r0:r1, c0:c1]: op(A)'s row i starts at A + i*lda (column i when transposed),
  // op(B)'s column j at B + j (row j when transposed).
  auto block = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    cblas_sgemm(CblasRowMajor, ta, tb, blasint(r1 - r0), blasint(c1 - c0), blasint(k), alpha,
                a + (transpose_a ? r0 : r0 * lda), blasint(lda),
                b + (transpose_b ? c0 * ldb : c0), blasint(ldb), beta, c + r0 * ldc + c0,
                blasint(ldc));
  };
  int workers = pool ? pool->num_threads() + 1 : 1;
  // Products under ~2 MFLOP cost more in hand-offs than they gain; OpenBLAS with threads of
  // its own (no runtime set it to one) splits them itself.
  if (workers <= 1 || blas_threads() != 1 || 2 * m * n * k < (int64_t(1) << 21))
    return block(0, m, 0, n);
  // Each block packs its own part of one operand and the whole other: split the longer side of
  // C, so that the operand packed again by every block is the smaller one (a batch of 100 rows
  // through a 784 x 512 layer splits its 512 columns, not its 100 rows). Two blocks per worker
  // at most: a late or descheduled worker then delays a part, and the packing is not repeated
  // more than needed.
  auto split = [&](int64_t len, int64_t min_block, auto run) {
    int64_t grain = std::max(min_block, (len + 2 * workers - 1) / (2 * workers));
    pool->parallel_for(len, grain, run);
  };
  if (n > m)
    split(n, 64, [&](int64_t c0, int64_t c1) { block(0, m, c0, c1); });
  else
    split(m, 16, [&](int64_t r0, int64_t r1) { block(r0, r1, 0, n); });
}

std::string blas_core() {
  const char* name = openblas_get_corename();
  return name ? name : "";
}

std::string blas_core_suggestion() {
  std::string core = blas_core();
  for (auto& c : core)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  // The generic sets OpenBLAS's DYNAMIC_ARCH falls back to when it does not know the CPU.
  bool generic = core == "prescott" || core == "core2" || core == "katmai" || core == "nehalem" ||
                 core == "northwood" || core == "banias" || core == "atom" || core == "unknown";
  if (!generic)
    return "";
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
  return "";
}

void reexec_with_better_blas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("RUNNEL_NO_BLAS_REEXEC"))
    return;
  std::string better = blas_core_suggestion();
  if (better.empty())
    return;
  ::setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  ::setenv("RUNNEL_NO_BLAS_REEXEC", "1", 1); // never loop, whatever the new process finds
  ::execv("/proc/self/exe", argv);
  // execv failed: carry on with the generic kernels.
}

void cpu_device::run_chunks(int64_t n, int64_t chunks,
                            const std::function<void(int64_t, int64_t)>& fn) {
  auto job = std::make_shared<loop_job>();
  job->n = n;
  job->chunks = chunks;
  job->per = (n + chunks - 1) / chunks;
  job->fn = &fn;
  int helpers = int(std::min<int64_t>(num_threads(), chunks - 1));
  for (int h = 0; h < helpers; ++h)
    impl_->pool.Schedule([job] { job->work(); });
  job->work();
  job->wait();
  // Every chunk is done, and no thread calls `fn` again: an error can leave this frame.
  if (job->error)
    std::rethrow_exception(job->error);
}

} // namespace runnel
