#pragma once
// MatMul in bfloat16 through oneDNN when the build has it (RUNNEL_HAVE_DNNL): on CPUs with
// AVX-512 BF16 its brgemm kernels run twice float32's FLOP/s (docs/gpu.md has the figures).
// Without oneDNN, or on a CPU without AVX-512 where oneDNN has no bfloat16 matmul, bfloat16
// MatMul goes through the float32 kernel (ops/cpu/reduced_precision.cpp).
// oneDNN types stay in matmul_dnnl.cpp.
#include <cstdint>
#include <memory>

#include "runnel/ops/core/status.hpp"

namespace runnel {

/// C[m,n] = op(A) · op(B) on bfloat16 bits, accumulated in float32 and rounded once. A is
/// [m,k] row-major ([k,m] when `transpose_a`) with rows `lda` elements apart (k, or m when
/// transposed, for a whole matrix; more for a block of rows), B is [k,n] ([n,k] when
/// `transpose_b`), C has rows n apart. The primitive is rebuilt when the shapes change; one per
/// kernel object (per block of rows). With `single_thread`, oneDNN uses the calling thread only
/// (the caller splits the rows over the device's pool).
class dnnl_matmul {
public:
  dnnl_matmul();
  ~dnnl_matmul();
  dnnl_matmul(dnnl_matmul&&) noexcept;
  dnnl_matmul& operator=(dnnl_matmul&&) noexcept;
  /// Whether oneDNN is built in and can run bfloat16 matmul on this CPU (AVX-512).
  static bool available();
  status run_bf16(int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b,
                  const uint16_t* a, int64_t lda, const uint16_t* b, uint16_t* c,
                  bool single_thread = false);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace runnel
