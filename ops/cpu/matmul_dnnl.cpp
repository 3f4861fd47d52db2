// bfloat16 MatMul through oneDNN's matmul primitive (brgemm kernels with AVX-512 BF16).
#include "runnel/ops/cpu/matmul_dnnl.hpp"

#if RUNNEL_HAVE_DNNL
#include <dnnl.hpp>

#include <vector>

// libgomp's API, declared here: compiling with -fopenmp would also switch Eigen to OpenMP.
extern "C" void omp_set_num_threads(int);
extern "C" int omp_get_num_procs();

namespace runnel {

struct dnnl_matmul::impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<int64_t> key;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  // A scratchpad per primitive: oneDNN's shared one is not safe with blocks running at once.
  dnnl::memory scratchpad;
};

dnnl_matmul::dnnl_matmul() : impl_(std::make_unique<impl>()) {}
dnnl_matmul::~dnnl_matmul() = default;
dnnl_matmul::dnnl_matmul(dnnl_matmul&&) noexcept = default;
dnnl_matmul& dnnl_matmul::operator=(dnnl_matmul&&) noexcept = default;

bool dnnl_matmul::available() {
  // oneDNN has bfloat16 matmul kernels only on CPUs with AVX-512 (natively with AVX-512 BF16);
  // elsewhere (an AVX2-only EPYC, say) it cannot make the primitive, and bfloat16 MatMul goes
  // through the float32 kernel instead. Asked once, with a small problem.
  static const bool usable = [] {
    try {
      using namespace dnnl;
      engine cpu(engine::kind::cpu, 0);
      auto bf16 = memory::data_type::bf16;
      memory::desc a({4, 4}, bf16, memory::dims{4, 1}), b({4, 4}, bf16, memory::dims{4, 1}),
          c({4, 4}, bf16, memory::dims{4, 1});
      matmul::primitive_desc pd(matmul::desc(a, b, c), cpu);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return usable;
}

status dnnl_matmul::run_bf16(int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b,
                             const uint16_t* a, int64_t lda, const uint16_t* b, uint16_t* c,
                             bool single_thread) {
  using namespace dnnl;
  auto& d = *impl_;
  // oneDNN's OpenMP reads the calling thread's setting; a pool thread keeps it.
  omp_set_num_threads(single_thread ? 1 : omp_get_num_procs());
  std::vector<int64_t> key{m, n, k, transpose_a, transpose_b, lda};
  try {
    if (key != d.key) {
      auto bf16 = memory::data_type::bf16;
      // Logical [m,k] and [k,n]; a transposed operand is the same bytes read column-major.
      memory::desc a_md({m, k}, bf16, transpose_a ? memory::dims{1, lda} : memory::dims{lda, 1});
      memory::desc b_md({k, n}, bf16, transpose_b ? memory::dims{1, k} : memory::dims{n, 1});
      memory::desc c_md({m, n}, bf16, memory::dims{n, 1});
      primitive_attr attr;
      attr.set_scratchpad_mode(scratchpad_mode::user);
      d.pd = matmul::primitive_desc(matmul::desc(a_md, b_md, c_md), attr, d.engine);
      d.prim = matmul(d.pd);
      d.scratchpad = memory(d.pd.scratchpad_desc(), d.engine);
      d.key = key;
    }
    memory a_mem(d.pd.src_desc(), d.engine, const_cast<uint16_t*>(a));
    memory b_mem(d.pd.weights_desc(), d.engine, const_cast<uint16_t*>(b));
    memory c_mem(d.pd.dst_desc(), d.engine, c);
    d.prim.execute(d.stream, {{DNNL_ARG_SRC, a_mem},
                              {DNNL_ARG_WEIGHTS, b_mem},
                              {DNNL_ARG_DST, c_mem},
                              {DNNL_ARG_SCRATCHPAD, d.scratchpad}});
    d.stream.wait();
  } catch (const dnnl::error& e) {
    d.key.clear();
    return internal_error(std::string("oneDNN bfloat16 matmul failed: ") + e.what());
  }
  return {};
}

} // namespace runnel

#else

namespace runnel {
struct dnnl_matmul::impl {};
dnnl_matmul::dnnl_matmul() = default;
dnnl_matmul::~dnnl_matmul() = default;
dnnl_matmul::dnnl_matmul(dnnl_matmul&&) noexcept = default;
dnnl_matmul& dnnl_matmul::operator=(dnnl_matmul&&) noexcept = default;
bool dnnl_matmul::available() {
  return false;
}
status dnnl_matmul::run_bf16(int64_t, int64_t, int64_t, bool, bool, const uint16_t*, int64_t,
                             const uint16_t*, uint16_t*, bool) {
  return unimplemented("built without oneDNN");
}
} // namespace runnel

#endif
