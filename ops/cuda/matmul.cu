// MatMul on the GPU through cuBLAS. cuBLAS is column-major: a row-major [r,c] matrix is its
// transpose to cuBLAS, so row-major C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ, i.e.
// gemm(op_b, op_a, n, m, k, B, A, C) with the leading dimensions of the row-major storage.
#include "runnel/ops/cuda/kernels.hpp"

namespace runnel {
namespace {

struct gemm_types {
  cudaDataType_t data;
  cublasComputeType_t compute;
};

result<gemm_types> types_for(dtype t, bool allow_tf32) {
  switch (t) {
    case dtype::f32:
      return gemm_types{CUDA_R_32F, allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case dtype::f16:
      return gemm_types{CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case dtype::bf16:
      return gemm_types{CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    case dtype::f64:
      return gemm_types{CUDA_R_64F, CUBLAS_COMPUTE_64F};
    default:
      return unimplemented("MatMul has no GPU kernel for " + std::string(name(t)));
  }
}

/// The launcher: one cublasGemmEx on the handle's stream (the context's compute stream).
cublasStatus_t launch_gemm(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                           const void* a, const void* b, void* c, gemm_types t) {
  float one_f = 1, zero_f = 0;
  double one_d = 1, zero_d = 0;
  bool f64 = t.compute == CUBLAS_COMPUTE_64F;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  return cublas().gemm_ex(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, int(n),
                      int(m), int(k), alpha, b, t.data, int(tb ? k : n), a, t.data, int(ta ? m : k),
                      beta, c, t.data, int(n), t.compute, CUBLAS_GEMM_DEFAULT);
}

} // namespace

status matmul_cuda(gpu_context& gpu, const tensor& a, const tensor& b, const gpu_matmul_options& o,
                   tensor* out, const std::string& node) {
  std::string where = "node '" + node + "' (op MatMul)";
  if (a.memory() != memory_space::device || b.memory() != memory_space::device)
    return invalid_argument(where + ": inputs must be in GPU memory, got " + a.memory_name() +
                            " and " + b.memory_name());
  if (a.type() != b.type())
    return invalid_argument(where + ": inputs are " + std::string(name(a.type())) + " and " +
                            std::string(name(b.type())));
  auto dims = matmul_dims_of(a.shape(), b.shape(), o.transpose_a, o.transpose_b);
  if (!dims.ok())
    return dims.error().with_context(where);
  auto [m, n, k] = *dims;
  auto types = types_for(a.type(), o.allow_tf32);
  if (!types.ok())
    return types.error().with_context(where);
  gemm_types t = *types;
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(a.type(), shape{m, n}, node));
  if (m == 0 || n == 0)
    return {};
  if (k == 0)
    return cuda_status(cudaMemsetAsync(out->raw_data(), 0, out->bytes(), gpu.compute()), where);
  return cublas_status(launch_gemm(gpu.cublas(), o.transpose_a, o.transpose_b, m, n, k,
                                   a.raw_data(), b.raw_data(), out->raw_data(), t),
                       where);
}

} // namespace runnel
