// MatMul through OpenBLAS (cblas_sgemm / cblas_dgemm), row-major, one BLAS thread per block of
// the product on the device's pool (parallel_sgemm); bfloat16 through oneDNN.
#include <cblas.h>

#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/cpu/matmul_dnnl.hpp"

namespace runnel {
namespace {

class matmul_kernel : public kernel {
public:
  explicit matmul_kernel(const kernel_construction& c)
      : transpose_a_(c.attr<bool>("transpose_a")), transpose_b_(c.attr<bool>("transpose_b")) {}

  status compute(kernel_context& ctx) override {
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    RUNNEL_ASSIGN_OR_RETURN(auto dims,
                            matmul_dims_of(a.shape(), b.shape(), transpose_a_, transpose_b_));
    const int64_t m = dims.m, n = dims.n, k = dims.k; // captured below: no structured binding
    tensor& out = ctx.allocate_output(0, a.type(), shape{m, n});
    if (m == 0 || n == 0)
      return {};
    if (a.type() == dtype::bf16 && k > 0)
      return compute_bf16(ctx, a, b, out, m, n, k);
    auto ta = transpose_a_ ? CblasTrans : CblasNoTrans;
    auto tb = transpose_b_ ? CblasTrans : CblasNoTrans;
    auto lda = blasint(a.dim(1)), ldb = blasint(b.dim(1));
    if (k == 0) {
      std::memset(out.raw_data(), 0, out.bytes());
      return {};
    }
    cpu_device* pool = ctx.has_cpu() ? &ctx.cpu() : nullptr;
    if (a.type() == dtype::f32) {
      parallel_sgemm(pool, transpose_a_, transpose_b_, m, n, k, 1.f, a.data<float>(), lda,
                     b.data<float>(), ldb, 0.f, out.data<float>(), n);
      return {};
    }
    // float64: blocks of rows [r0, r1) over the pool.
    auto rows = [&](int64_t r0, int64_t r1) {
      cblas_dgemm(CblasRowMajor, ta, tb, blasint(r1 - r0), blasint(n), blasint(k), 1.0,
                  a.data<double>() + (transpose_a_ ? r0 : r0 * lda), lda, b.data<double>(), ldb,
                  0.0, out.data<double>() + r0 * n, blasint(n));
    };
    if (pool && pool->num_threads() > 0 && blas_threads() == 1)
      pool->parallel_for(m, std::max<int64_t>(16, (int64_t(1) << 19) / std::max<int64_t>(1, n * k)),
                         rows);
    else
      rows(0, m);
    return {};
  }

private:
  /// bfloat16 through oneDNN: float32 accumulation, one rounding per output element.
  status compute_bf16(kernel_context& ctx, const tensor& a, const tensor& b, tensor& out,
                      int64_t m, int64_t n, int64_t k) {
    auto* pa = reinterpret_cast<const uint16_t*>(a.raw_data());
    auto* pb = reinterpret_cast<const uint16_t*>(b.raw_data());
    auto* pc = reinterpret_cast<uint16_t*>(out.raw_data());
    int64_t lda = a.dim(1);
    // Like the float32 kernel: the device's pool splits the rows, oneDNN runs each block on one
    // thread (its OpenMP team would compete with the pool and the actors for the cores).
    int blocks = ctx.has_cpu() ? ctx.cpu().num_threads() + 1 : 1;
    if (dnnl_.empty())
      dnnl_.resize(1);
    if (blocks <= 1 || m < 32 * blocks)
      return dnnl_[0].run_bf16(m, n, k, transpose_a_, transpose_b_, pa, lda, pb, pc);
    if (int(dnnl_.size()) < blocks)
      dnnl_.resize(size_t(blocks));
    int64_t rows = (m + blocks - 1) / blocks;
    std::vector<status> results(static_cast<size_t>(blocks));
    ctx.cpu().parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int64_t r0 = i * rows, r1 = std::min(m, r0 + rows);
        if (r0 >= r1)
          continue;
        const uint16_t* ai = pa + (transpose_a_ ? r0 : r0 * lda);
        results[size_t(i)] = dnnl_[size_t(i)].run_bf16(r1 - r0, n, k, transpose_a_, transpose_b_,
                                                       ai, lda, pb, pc + r0 * n, true);
      }
    });
    for (auto& st : results)
      RUNNEL_RETURN_IF_ERROR(st);
    return {};
  }

  bool transpose_a_, transpose_b_;
  std::vector<dnnl_matmul> dnnl_; // bfloat16: one per block of rows, made on first use
};


class batch_matmul_kernel : public kernel {
public:
  explicit batch_matmul_kernel(const kernel_construction& c)
      : adj_x_(c.attr<bool>("adj_x")), adj_y_(c.attr<bool>("adj_y")) {}
  status compute(kernel_context& ctx) override {
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    int r = a.rank();
    if (r < 2 || b.rank() != r)
      return invalid_argument("x " + a.shape().to_string() + " and y " + b.shape().to_string() +
                              " must be batches of matrices of the same rank");
    int64_t batch = 1;
    std::vector<int64_t> dims;
    for (int d = 0; d < r - 2; ++d) {
      if (a.dim(d) != b.dim(d))
        return invalid_argument("batch dimensions of " + a.shape().to_string() + " and " +
                                b.shape().to_string() + " differ");
      batch *= a.dim(d);
      dims.push_back(a.dim(d));
    }
    int64_t m = a.dim(adj_x_ ? r - 1 : r - 2), k = a.dim(adj_x_ ? r - 2 : r - 1);
    int64_t kb = b.dim(adj_y_ ? r - 1 : r - 2), n = b.dim(adj_y_ ? r - 2 : r - 1);
    if (k != kb)
      return invalid_argument("inner dimensions of " + a.shape().to_string() + " and " +
                              b.shape().to_string() + " differ");
    dims.push_back(m);
    dims.push_back(n);
    tensor& out = ctx.allocate_output(0, a.type(), shape(dims));
    int64_t sa = a.dim(r - 2) * a.dim(r - 1), sb = b.dim(r - 2) * b.dim(r - 1);
    auto ta = adj_x_ ? CblasTrans : CblasNoTrans, tb = adj_y_ ? CblasTrans : CblasNoTrans;
    for (int64_t i = 0; i < batch && m * n > 0; ++i) {
      if (a.type() == dtype::f32)
        cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.f, a.data<float>() + i * sa,
                    int(a.dim(r - 1)), b.data<float>() + i * sb, int(b.dim(r - 1)), 0.f,
                    out.data<float>() + i * m * n, int(n));
      else
        cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0, a.data<double>() + i * sa,
                    int(a.dim(r - 1)), b.data<double>() + i * sb, int(b.dim(r - 1)), 0.0,
                    out.data<double>() + i * m * n, int(n));
    }
    return {};
  }

private:
  bool adj_x_, adj_y_;
};

} // namespace

RUNNEL_KERNEL_FAMILY_PART(math, matmul) {
  reg.add("MatMul", device_type::cpu, {dtype::f32, dtype::f64}, make_kernel<matmul_kernel>);
  if (dnnl_matmul::available())
    reg.add("MatMul", device_type::cpu, {dtype::bf16}, make_kernel<matmul_kernel>);
  {
    auto cpu = device_type::cpu;
    const std::vector<dtype> reals{dtype::f32, dtype::f64};
    reg.add("BatchMatMul", cpu, reals, make_kernel<batch_matmul_kernel>);
  }
}

} // namespace runnel
