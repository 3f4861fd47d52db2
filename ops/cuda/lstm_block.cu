// The fused LSTM cell on the GPU (ops/layers/lstm_block.hpp has the formulas), float32: the gates are
// two cuBLAS products into one [batch, 4·cell] buffer (x's rows of w, then h_prev's,
// accumulating: no concatenated copy), then one kernel computes the seven outputs. The gradient
// is one element-wise kernel and, with peepholes, a column sum per peephole weight.
#include "runnel/ops/cuda/kernels.hpp"

namespace runnel {
namespace {

struct cell_args {
  const float *cs_prev, *wci, *wcf, *wco, *b;
  float forget_bias, cell_clip;
  bool peephole;
};

__device__ float sigmoidf(float x) { return 1.f / (1.f + expf(-x)); }

// ---- kernels ----

__global__ void cell_kernel(const float* gates, cell_args a, float* i_out, float* cs_out,
                            float* f_out, float* o_out, float* ci_out, float* co_out, float* h_out,
                            int64_t n, int64_t c) {
  for (int64_t at = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; at < n * c;
       at += int64_t(blockDim.x) * gridDim.x) {
    int64_t r = at / c, j = at % c;
    const float* g = gates + r * 4 * c;
    float csp = a.cs_prev[at];
    float i = sigmoidf(g[j] + a.b[j] + (a.peephole ? csp * a.wci[j] : 0.f));
    float ci = tanhf(g[c + j] + a.b[c + j]);
    float f = sigmoidf(g[2 * c + j] + a.b[2 * c + j] + a.forget_bias +
                       (a.peephole ? csp * a.wcf[j] : 0.f));
    float cs = ci * i + csp * f;
    if (a.cell_clip > 0)
      cs = fminf(fmaxf(cs, -a.cell_clip), a.cell_clip);
    float o = sigmoidf(g[3 * c + j] + a.b[3 * c + j] + (a.peephole ? cs * a.wco[j] : 0.f));
    float co = tanhf(cs);
    i_out[at] = i, cs_out[at] = cs, f_out[at] = f, o_out[at] = o;
    ci_out[at] = ci, co_out[at] = co, h_out[at] = co * o;
  }
}

struct grad_args {
  const float *cs_prev, *wci, *wcf, *wco, *i, *cs, *f, *o, *ci, *co, *cs_grad, *h_grad;
  bool peephole;
};

__global__ void cell_grad_kernel(grad_args a, float* cs_prev_grad, float* dicfo, int64_t n,
                                 int64_t c) {
  for (int64_t at = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; at < n * c;
       at += int64_t(blockDim.x) * gridDim.x) {
    int64_t r = at / c, j = at % c;
    float i = a.i[at], f = a.f[at], o = a.o[at], ci = a.ci[at], co = a.co[at];
    float d_o = o * (1 - o) * a.h_grad[at] * co;
    float dcs = (1 - co * co) * a.h_grad[at] * o + a.cs_grad[at];
    if (a.peephole)
      dcs += d_o * a.wco[j];
    float dci = (1 - ci * ci) * dcs * i;
    float df = f * (1 - f) * dcs * a.cs_prev[at];
    float di = i * (1 - i) * dcs * ci;
    float* g = dicfo + r * 4 * c;
    g[j] = di, g[c + j] = dci, g[2 * c + j] = df, g[3 * c + j] = d_o;
    cs_prev_grad[at] = dcs * f + (a.peephole ? di * a.wci[j] + df * a.wcf[j] : 0.f);
  }
}

/// Per column j: the peephole gradients, sums over the batch of di·cs_prev, df·cs_prev, do·cs.
__global__ void peephole_grad_kernel(const float* dicfo, const float* cs_prev, const float* cs,
                                     float* wci_grad, float* wcf_grad, float* wco_grad, int64_t n,
                                     int64_t c) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < c;
       j += int64_t(blockDim.x) * gridDim.x) {
    float si = 0, sf = 0, so = 0;
    for (int64_t r = 0; r < n; ++r) {
      const float* g = dicfo + r * 4 * c;
      si += g[j] * cs_prev[r * c + j];
      sf += g[2 * c + j] * cs_prev[r * c + j];
      so += g[3 * c + j] * cs[r * c + j];
    }
    wci_grad[j] = si, wcf_grad[j] = sf, wco_grad[j] = so;
  }
}

int blocks_for(int64_t n) {
  return int(std::min<int64_t>((n + 255) / 256, 65535 * 4));
}

// ---- host side ----

status check_cell(std::span<const tensor> in, int64_t* n, int64_t* input, int64_t* c,
                  const std::string& where) {
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k].memory() != memory_space::device || in[k].type() != dtype::f32)
      return invalid_argument(where + ": input " + std::to_string(k) + " must be float32 in GPU "
                              "memory, got " + std::string(name(in[k].type())) + " in " +
                              in[k].memory_name());
  const tensor &x = in[0], &cs = in[1], &h = in[2], &w = in[3], &b = in[7];
  if (x.rank() != 2 || cs.rank() != 2 || h.rank() != 2 || w.rank() != 2 || b.rank() != 1)
    return invalid_argument(where + ": x, cs_prev, h_prev and w must be matrices, b a vector");
  *n = x.dim(0), *input = x.dim(1), *c = cs.dim(1);
  bool ok = cs.dim(0) == *n && h.dim(0) == *n && h.dim(1) == *c && w.dim(0) == *input + *c &&
            w.dim(1) == 4 * *c && b.dim(0) == 4 * *c;
  for (int k : {4, 5, 6})
    ok = ok && in[size_t(k)].rank() == 1 && in[size_t(k)].dim(0) == *c;
  if (!ok)
    return invalid_argument(where + ": shapes do not fit an LSTM cell: x " + x.shape().to_string() +
                            ", cs_prev " + cs.shape().to_string() + ", h_prev " +
                            h.shape().to_string() + ", w " + w.shape().to_string() + ", b " +
                            b.shape().to_string());
  return {};
}

/// C [m, n] (+)= A [m, k] · B [k, n], row-major, float32 (computed as Cᵀ = Bᵀ·Aᵀ).
cublasStatus_t gemm(cublasHandle_t h, int64_t m, int64_t n, int64_t k, const float* a,
                    const float* b, float* c, float beta) {
  float one = 1;
  return cublas().sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &one, b, int(n), a,
                     int(k), &beta, c, int(n));
}

} // namespace

status lstm_block_cell_cuda(gpu_context& gpu, std::span<const tensor> in, const gpu_lstm_options& o,
                            std::span<tensor> out, const std::string& node) {
  std::string where = "node '" + node + "' (op LSTMBlockCell)";
  if (in.size() != 8 || out.size() != 7)
    return internal_error(where + ": needs 8 inputs and 7 outputs");
  int64_t n, input, c;
  RUNNEL_RETURN_IF_ERROR(check_cell(in, &n, &input, &c, where));
  for (auto& t : out) {
    RUNNEL_ASSIGN_OR_RETURN(t, gpu.allocate(dtype::f32, shape{n, c}, node));
  }
  if (n * c == 0)
    return {};
  RUNNEL_ASSIGN_OR_RETURN(tensor gates, gpu.allocate(dtype::f32, shape{n, 4 * c}, node));
  // The compute stream's handle: the default math mode keeps float32 exact (no TF32).
  const float* w = in[3].data<float>();
  if (input > 0)
    RUNNEL_RETURN_IF_ERROR(cublas_status(
        gemm(gpu.cublas(), n, 4 * c, input, in[0].data<float>(), w, gates.data<float>(), 0.f), where));
  RUNNEL_RETURN_IF_ERROR(cublas_status(gemm(gpu.cublas(), n, 4 * c, c, in[2].data<float>(),
                                            w + input * 4 * c, gates.data<float>(),
                                            input > 0 ? 1.f : 0.f),
                                       where));
  cell_args a{in[1].data<float>(), in[4].data<float>(), in[5].data<float>(), in[6].data<float>(),
              in[7].data<float>(), o.forget_bias, o.cell_clip, o.use_peephole};
  cell_kernel<<<blocks_for(n * c), 256, 0, gpu.compute()>>>(
      gates.data<float>(), a, out[0].data<float>(), out[1].data<float>(), out[2].data<float>(),
      out[3].data<float>(), out[4].data<float>(), out[5].data<float>(), out[6].data<float>(), n, c);
  return cuda_status(cudaGetLastError(), where);
}

status lstm_block_cell_grad_cuda(gpu_context& gpu, std::span<const tensor> in, bool use_peephole,
                                 std::span<tensor> out, const std::string& node) {
  std::string where = "node '" + node + "' (op LSTMBlockCellGrad)";
  if (in.size() != 16 || out.size() != 5)
    return internal_error(where + ": needs 16 inputs and 5 outputs");
  int64_t n, input, c;
  RUNNEL_RETURN_IF_ERROR(check_cell(in, &n, &input, &c, where));
  for (size_t k = 8; k < 16; ++k)
    if (!(in[k].shape() == shape{n, c}))
      return invalid_argument(where + ": input " + std::to_string(k) + " has shape " +
                              in[k].shape().to_string() + ", expected " + shape{n, c}.to_string());
  RUNNEL_ASSIGN_OR_RETURN(out[0], gpu.allocate(dtype::f32, shape{n, c}, node));
  RUNNEL_ASSIGN_OR_RETURN(out[1], gpu.allocate(dtype::f32, shape{n, 4 * c}, node));
  for (int k = 2; k < 5; ++k) {
    RUNNEL_ASSIGN_OR_RETURN(out[size_t(k)], gpu.allocate(dtype::f32, shape{c}, node));
  }
  auto p = [&](size_t k) { return in[k].data<float>(); };
  if (n * c > 0) {
    grad_args a{p(1), p(4), p(5), p(6), p(8), p(9), p(10), p(11), p(12), p(13), p(14), p(15),
                use_peephole};
    cell_grad_kernel<<<blocks_for(n * c), 256, 0, gpu.compute()>>>(a, out[0].data<float>(),
                                                                  out[1].data<float>(), n, c);
    RUNNEL_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), where));
  }
  if (c == 0)
    return {};
  if (!use_peephole || n == 0) {
    for (int k = 2; k < 5; ++k)
      RUNNEL_RETURN_IF_ERROR(cuda_status(
          cudaMemsetAsync(out[size_t(k)].raw_data(), 0, out[size_t(k)].bytes(), gpu.compute()),
          where));
    return {};
  }
  peephole_grad_kernel<<<blocks_for(c), 256, 0, gpu.compute()>>>(
      out[1].data<float>(), p(1), p(9), out[2].data<float>(), out[3].data<float>(),
      out[4].data<float>(), n, c);
  return cuda_status(cudaGetLastError(), where);
}

} // namespace runnel
