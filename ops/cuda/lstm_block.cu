// The fused LSTM cell on the GPU (ops/layers/lstm_block.hpp has the formulas), float32: the gates are
// two cuBLAS products into one [batch, 4·cell] buffer (x's rows of w, then h_prev's,
// accumulating: no concatenated copy), then one kernel computes the seven outputs. The gradient
// is one element-wise kernel and, with peepholes, a column sum per peephole weight. BlockLSTM
// runs the same kernels over a sequence, x's half of the gates one product for all steps; its
// gradient runs only the recurrence step by step, then one product each for x's and w's.
#include "runnel/ops/cuda/kernels.hpp"
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

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
  // BlockLSTMGrad: the gradients the next step passes back to this one's cs and h (or null).
  const float *cs_carry = nullptr, *h_carry = nullptr;
};

__global__ void cell_grad_kernel(grad_args a, float* cs_prev_grad, float* dicfo, int64_t n,
                                 int64_t c) {
  for (int64_t at = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; at < n * c;
       at += int64_t(blockDim.x) * gridDim.x) {
    int64_t r = at / c, j = at % c;
    float i = a.i[at], f = a.f[at], o = a.o[at], ci = a.ci[at], co = a.co[at];
    float h_grad = a.h_grad[at] + (a.h_carry ? a.h_carry[at] : 0.f);
    float cs_grad = a.cs_grad[at] + (a.cs_carry ? a.cs_carry[at] : 0.f);
    float d_o = o * (1 - o) * h_grad * co;
    float dcs = (1 - co * co) * h_grad * o + cs_grad;
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

/// Per column j: the peephole gradients, sums over the batch of di·cs_prev, df·cs_prev, do·cs
/// (added to what is there with `accumulate`: BlockLSTMGrad's steps).
__global__ void peephole_grad_kernel(const float* dicfo, const float* cs_prev, const float* cs,
                                     float* wci_grad, float* wcf_grad, float* wco_grad, int64_t n,
                                     int64_t c, bool accumulate = false) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < c;
       j += int64_t(blockDim.x) * gridDim.x) {
    float si = 0, sf = 0, so = 0;
    for (int64_t r = 0; r < n; ++r) {
      const float* g = dicfo + r * 4 * c;
      si += g[j] * cs_prev[r * c + j];
      sf += g[2 * c + j] * cs_prev[r * c + j];
      so += g[3 * c + j] * cs[r * c + j];
    }
    if (accumulate)
      si += wci_grad[j], sf += wcf_grad[j], so += wco_grad[j];
    wci_grad[j] = si, wcf_grad[j] = sf, wco_grad[j] = so;
  }
}

/// out[j] = sum over rows of m[r, j].
__global__ void column_sum_kernel(const float* m, int64_t rows, int64_t cols, float* out) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < cols;
       j += int64_t(blockDim.x) * gridDim.x) {
    float s = 0;
    for (int64_t r = 0; r < rows; ++r)
      s += m[r * cols + j];
    out[j] = s;
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

/// C [m, n] (+)= op(A) [m, k] · op(B) [k, n], row-major, float32, A and B whole matrices
/// (computed as Cᵀ = op(B)ᵀ·op(A)ᵀ).
cublasStatus_t gemm(cublasHandle_t h, int64_t m, int64_t n, int64_t k, const float* a,
                    const float* b, float* c, float beta, bool ta = false, bool tb = false) {
  float one = 1;
  return cublas().sgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, int(n),
                        int(m), int(k), &one, b, int(tb ? k : n), a, int(ta ? m : k), &beta, c,
                        int(n));
}

/// launch_as_graph's family for a node's launches: its name, sizes and options (the floats
/// exactly, in hexadecimal).
std::string launch_family(const std::string& node, std::initializer_list<int64_t> sizes,
                          const gpu_lstm_options& o) {
  std::string f = node;
  for (int64_t v : sizes)
    f += ' ' + std::to_string(v);
  char options[96];
  std::snprintf(options, sizeof options, " %a %a %d", double(o.forget_bias), double(o.cell_clip),
                int(o.use_peephole));
  return f + options;
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

namespace {

/// BlockLSTM's shapes: [time, batch, input] x after the step count, then the cell's inputs.
status check_block(std::span<const tensor> in, int64_t* steps, int64_t* time, int64_t* n,
                   int64_t* input, int64_t* c, const std::string& where) {
  const tensor& len = in[0];
  if (len.rank() != 0 || len.type() != dtype::i64)
    return invalid_argument(where + ": seq_len_max must be an int64 scalar, got " +
                            len.shape().to_string());
  for (size_t k = 1; k < 9; ++k)
    if (in[k].memory() != memory_space::device || in[k].type() != dtype::f32)
      return invalid_argument(where + ": input " + std::to_string(k) + " must be float32 in GPU "
                              "memory, got " + std::string(name(in[k].type())) + " in " +
                              in[k].memory_name());
  const tensor &x = in[1], &cs = in[2], &h = in[3], &w = in[4], &b = in[8];
  if (x.rank() != 3 || cs.rank() != 2 || h.rank() != 2 || w.rank() != 2 || b.rank() != 1)
    return invalid_argument(where + ": x must be [time, batch, input], cs_prev, h_prev and w "
                            "matrices, b a vector");
  *time = x.dim(0), *n = x.dim(1), *input = x.dim(2), *c = cs.dim(1);
  bool ok = cs.dim(0) == *n && h.dim(0) == *n && h.dim(1) == *c && w.dim(0) == *input + *c &&
            w.dim(1) == 4 * *c && b.dim(0) == 4 * *c;
  for (size_t k : {5, 6, 7})
    ok = ok && in[k].rank() == 1 && in[k].dim(0) == *c;
  if (!ok)
    return invalid_argument(where + ": shapes do not fit an LSTM cell: x " + x.shape().to_string() +
                            ", cs_prev " + cs.shape().to_string() + ", h_prev " +
                            h.shape().to_string() + ", w " + w.shape().to_string() + ", b " +
                            b.shape().to_string());
  int64_t max = len.data<int64_t>()[0];
  if (max < 0)
    return invalid_argument(where + ": seq_len_max is " + std::to_string(max) + ", must be >= 0");
  *steps = std::min(max, *time);
  return {};
}

} // namespace

status block_lstm_cuda(gpu_context& gpu, std::span<const tensor> in, const gpu_lstm_options& o,
                       std::span<tensor> out, const std::string& node) {
  std::string where = "node '" + node + "' (op BlockLSTM)";
  if (in.size() != 9 || out.size() != 7)
    return internal_error(where + ": needs 9 inputs and 7 outputs");
  int64_t steps, time, n, input, c;
  RUNNEL_RETURN_IF_ERROR(check_block(in, &steps, &time, &n, &input, &c, where));
  int64_t step = n * c;
  // Buffers that keep their addresses from step to step, so that the launches' graph replays.
  auto& home = gpu.steady_buffers_of(node);
  std::vector<std::pair<dtype, shape>> wanted(out.size(), {dtype::f32, shape{time, n, c}});
  RUNNEL_ASSIGN_OR_RETURN(std::vector<tensor> mine, gpu.steady_outputs(home, wanted, node));
  std::copy(mine.begin(), mine.end(), out.begin());
  for (tensor& t : out) {
    if (time > steps)
      RUNNEL_RETURN_IF_ERROR(cuda_status(
          cudaMemsetAsync(t.data<float>() + steps * step, 0,
                          size_t((time - steps) * step) * sizeof(float), gpu.compute()),
          where));
  }
  if (steps == 0 || step == 0)
    return {};
  // x's half of every step's gates at once, then h_prev's per step: 2 launches a step, enqueued
  // as one CUDA graph (gpu_context::launch_as_graph) when the same buffers come again.
  size_t gate_bytes = size_t(steps * n * 4 * c) * sizeof(float);
  RUNNEL_ASSIGN_OR_RETURN(void* gates, gpu.steady_scratch(gate_bytes, node));
  RUNNEL_ASSIGN_OR_RETURN(std::vector<tensor> x, gpu.steady_inputs(home, in, node));
  const float* w = x[4].data<float>();
  float* g = static_cast<float*>(gates);
  std::vector<const void*> pointers{g};
  for (size_t k = 1; k < 9; ++k)
    pointers.push_back(x[k].raw_data());
  for (auto& t : out)
    pointers.push_back(t.raw_data());
  std::string family = launch_family(node, {steps, n, input, c}, o);
  return gpu.launch_as_graph(family, pointers, [&](cudaStream_t s) -> status {
    if (input > 0)
      RUNNEL_RETURN_IF_ERROR(cublas_status(
          gemm(gpu.cublas(), steps * n, 4 * c, input, x[1].data<float>(), w, g, 0.f), where));
    else
      RUNNEL_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(g, 0, gate_bytes, s), where));
    for (int64_t t = 0; t < steps; ++t) {
      const float* cs_prev = t == 0 ? x[2].data<float>() : out[1].data<float>() + (t - 1) * step;
      const float* h_prev = t == 0 ? x[3].data<float>() : out[6].data<float>() + (t - 1) * step;
      float* gt = g + t * n * 4 * c;
      RUNNEL_RETURN_IF_ERROR(cublas_status(
          gemm(gpu.cublas(), n, 4 * c, c, h_prev, w + input * 4 * c, gt, 1.f), where));
      cell_args a{cs_prev,
                  x[5].data<float>(),
                  x[6].data<float>(),
                  x[7].data<float>(),
                  x[8].data<float>(),
                  o.forget_bias,
                  o.cell_clip,
                  o.use_peephole};
      auto at = [&](int k) { return out[size_t(k)].data<float>() + t * step; };
      cell_kernel<<<blocks_for(step), 256, 0, s>>>(gt, a, at(0), at(1), at(2), at(3), at(4), at(5),
                                                   at(6), n, c);
      RUNNEL_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), where));
    }
    return {};
  });
}

namespace {

/// BlockLSTMGrad's launches on stream `s` (and cuBLAS, pointed at it): the outputs zeroed, three
/// launches a step backwards in time, then the gradients over every step at once.
status block_lstm_grad_launches(gpu_context& gpu, cudaStream_t s, std::span<const tensor> in,
                                bool use_peephole, std::span<tensor> out, float* dicfo,
                                int64_t steps, int64_t input, int64_t c, const std::string& where) {
  for (auto& t : out)
    RUNNEL_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(t.raw_data(), 0, t.bytes(), s), where));
  int64_t n = in[2].dim(0), step = n * c;
  if (steps == 0 || step == 0)
    return {};
  auto p = [&](size_t k) { return in[k].data<float>(); };
  auto o = [&](size_t k) { return out[k].data<float>(); };
  const float* w = p(4);
  // out[1] and out[2] (cs_prev's and h_prev's gradients) carry the recurrence's gradients from
  // step t+1 to step t: each thread reads its element of the carry before writing it.
  for (int64_t t = steps - 1; t >= 0; --t) {
    const float* cs_prev = t == 0 ? p(2) : p(10) + (t - 1) * step;
    auto at = [&](size_t k) { return p(k) + t * step; };
    grad_args a{cs_prev, p(5), p(6), p(7), at(9), at(10), at(11), at(12), at(13), at(14),
                at(16), at(17), use_peephole, o(1), o(2)};
    float* dt = dicfo + t * n * 4 * c;
    cell_grad_kernel<<<blocks_for(step), 256, 0, s>>>(a, o(1), dt, n, c);
    RUNNEL_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), where));
    if (use_peephole) {
      peephole_grad_kernel<<<blocks_for(c), 256, 0, s>>>(dt, cs_prev, at(10), o(4), o(5), o(6), n,
                                                         c, true);
      RUNNEL_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), where));
    }
    RUNNEL_RETURN_IF_ERROR(cublas_status(
        gemm(gpu.cublas(), n, c, 4 * c, dt, w + input * 4 * c, o(2), 0.f, false, true), where));
  }
  // x's, w's and b's gradients over every step at once.
  if (input > 0) {
    RUNNEL_RETURN_IF_ERROR(cublas_status(
        gemm(gpu.cublas(), steps * n, input, 4 * c, dicfo, w, o(0), 0.f, false, true), where));
    RUNNEL_RETURN_IF_ERROR(cublas_status(
        gemm(gpu.cublas(), input, 4 * c, steps * n, p(1), dicfo, o(3), 0.f, true, false), where));
  }
  float* wh_grad = o(3) + input * 4 * c; // h_prev for step 0, h of step t-1 after
  RUNNEL_RETURN_IF_ERROR(cublas_status(
      gemm(gpu.cublas(), c, 4 * c, n, p(3), dicfo, wh_grad, 0.f, true, false), where));
  if (steps > 1)
    RUNNEL_RETURN_IF_ERROR(cublas_status(gemm(gpu.cublas(), c, 4 * c, (steps - 1) * n, p(15),
                                              dicfo + n * 4 * c, wh_grad, 1.f, true, false),
                                         where));
  column_sum_kernel<<<blocks_for(4 * c), 256, 0, s>>>(dicfo, steps * n, 4 * c, o(7));
  return cuda_status(cudaGetLastError(), where);
}

} // namespace

status block_lstm_grad_cuda(gpu_context& gpu, std::span<const tensor> in, bool use_peephole,
                            std::span<tensor> out, const std::string& node) {
  std::string where = "node '" + node + "' (op BlockLSTMGrad)";
  if (in.size() != 18 || out.size() != 8)
    return internal_error(where + ": needs 18 inputs and 8 outputs");
  int64_t steps, time, n, input, c;
  RUNNEL_RETURN_IF_ERROR(check_block(in, &steps, &time, &n, &input, &c, where));
  for (size_t k = 9; k < 18; ++k)
    if (!(in[k].shape() == shape{time, n, c}))
      return invalid_argument(where + ": input " + std::to_string(k) + " has shape " +
                              in[k].shape().to_string() + ", expected " +
                              shape{time, n, c}.to_string());
  // Buffers that keep their addresses from step to step, so that the launches' graph replays.
  auto& home = gpu.steady_buffers_of(node);
  std::vector<std::pair<dtype, shape>> wanted;
  for (size_t k = 0; k < 8; ++k)
    wanted.push_back({dtype::f32, in[k + 1].shape()});
  RUNNEL_ASSIGN_OR_RETURN(std::vector<tensor> mine, gpu.steady_outputs(home, wanted, node));
  std::copy(mine.begin(), mine.end(), out.begin());
  int64_t step = n * c;
  float* dicfo = nullptr; // the gates' gradients, every step's
  if (steps > 0 && step > 0) {
    RUNNEL_ASSIGN_OR_RETURN(void* scratch,
                            gpu.steady_scratch(size_t(steps * n * 4 * c) * sizeof(float), node));
    dicfo = static_cast<float*>(scratch);
  }
  RUNNEL_ASSIGN_OR_RETURN(std::vector<tensor> x, gpu.steady_inputs(home, in, node));
  std::vector<const void*> pointers{dicfo};
  for (size_t k = 1; k < 18; ++k)
    pointers.push_back(x[k].raw_data());
  for (auto& t : out)
    pointers.push_back(t.raw_data());
  std::string family = launch_family(node, {steps, n, input, c}, {.use_peephole = use_peephole});
  return gpu.launch_as_graph(family, pointers, [&](cudaStream_t s) {
    return block_lstm_grad_launches(gpu, s, x, use_peephole, out, dicfo, steps, input, c, where);
  });
}

} // namespace runnel
