#include "runnel/ops/cpu/cpu_device.hpp"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <unistd.h>

#include "runnel/ops/cpu/helper_pool.hpp"

#if RUNNEL_HAVE_DNNL
#include <dnnl.h>
// libgomp's API, declared here: compiling with -fopenmp would also switch Eigen to OpenMP.
extern "C" void omp_set_num_threads(int);
#endif

namespace runnel {

struct cpu_device::impl {
  explicit impl(int threads) : helpers(threads) {}
  helper_pool helpers;
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

namespace {

bool has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

/// Whether float32 products go through oneDNN's sgemm (see sgemm_library).
bool sgemm_through_onednn() {
  static const bool chosen = [] {
    if (!RUNNEL_HAVE_DNNL)
      return false;
    const char* forced = std::getenv("RUNNEL_SGEMM");
    std::string want = forced ? forced : "";
    if (want == "openblas" || want == "onednn")
      return want == "onednn";
    if (!want.empty())
      std::fprintf(stderr,
                   "runnel: RUNNEL_SGEMM=%s is neither 'openblas' nor 'onednn'; using the "
                   "default for this CPU\n",
                   forced);
    return has_avx512();
  }();
  return chosen;
}

/// One block of C through oneDNN on the calling thread; false when oneDNN refused it.
bool onednn_sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc) {
#if RUNNEL_HAVE_DNNL
  omp_set_num_threads(1); // oneDNN's OpenMP reads the calling thread's setting
  return dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                    ldb, beta, c, ldc) == dnnl_success;
#else
  (void)transpose_a, (void)transpose_b, (void)m, (void)n, (void)k, (void)alpha, (void)a;
  (void)lda, (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  return false;
#endif
}

} // namespace

std::string sgemm_library() {
  return sgemm_through_onednn() ? "oneDNN" : "OpenBLAS " + blas_core();
}

void parallel_sgemm(cpu_device* pool, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                    int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0)
    return;
  auto ta = transpose_a ? CblasTrans : CblasNoTrans, tb = transpose_b ? CblasTrans : CblasNoTrans;
  // oneDNN runs a block on its caller's thread; OpenBLAS with threads of its own (no runtime
  // set it to one) splits each call itself, so it keeps those.
  bool onednn = sgemm_through_onednn() && blas_threads() == 1;
  // The block C[r0:r1, c0:c1]: op(A)'s row i starts at A + i*lda (column i when transposed),
  // op(B)'s column j at B + j (row j when transposed).
  auto block = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const float* pa = a + (transpose_a ? r0 : r0 * lda);
    const float* pb = b + (transpose_b ? c0 * ldb : c0);
    float* pc = c + r0 * ldc + c0;
    if (onednn && onednn_sgemm(transpose_a, transpose_b, r1 - r0, c1 - c0, k, alpha, pa, lda, pb,
                               ldb, beta, pc, ldc))
      return;
    cblas_sgemm(CblasRowMajor, ta, tb, blasint(r1 - r0), blasint(c1 - c0), blasint(k), alpha, pa,
                blasint(lda), pb, blasint(ldb), beta, pc, blasint(ldc));
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
  if (has_avx512())
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
  auto job = std::make_shared<loop_job>(n, chunks, fn);
  impl_->helpers.post(job, int(std::min<int64_t>(num_threads(), chunks - 1)));
  job->work();
  job->finish();
}

} // namespace runnel
