// LSTMBlockCell and LSTMBlockCellGrad on the CPU (float32): the gates through one OpenBLAS
// product per half of w (x's rows, then h_prev's, accumulating: no concatenated copy; rows split
// over the device's pool), then one pass over [batch, cell] for the element-wise part. ops/layers/lstm_block.hpp has the formulas.
#include <algorithm>
#include <cmath>

#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {
namespace {

float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

/// The shapes of one call: batch, input and cell sizes, checked against every input.
struct cell_dims {
  int64_t batch, input, cell;
};

result<cell_dims> dims_of(std::span<const tensor> in) {
  const tensor &x = in[0], &cs = in[1], &h = in[2], &w = in[3], &b = in[7];
  if (x.rank() != 2 || cs.rank() != 2 || h.rank() != 2 || w.rank() != 2 || b.rank() != 1)
    return invalid_argument("x, cs_prev, h_prev and w must be matrices and b a vector, got " +
                            x.shape().to_string() + ", " + cs.shape().to_string() + ", " +
                            h.shape().to_string() + ", " + w.shape().to_string() + ", " +
                            b.shape().to_string());
  cell_dims d{x.dim(0), x.dim(1), cs.dim(1)};
  bool ok = cs.dim(0) == d.batch && h.dim(0) == d.batch && h.dim(1) == d.cell &&
            w.dim(0) == d.input + d.cell && w.dim(1) == 4 * d.cell && b.dim(0) == 4 * d.cell;
  for (int i : {4, 5, 6})
    ok = ok && in[size_t(i)].rank() == 1 && in[size_t(i)].dim(0) == d.cell;
  if (!ok)
    return invalid_argument("shapes do not fit an LSTM cell of " + std::to_string(d.cell) +
                            " units on x " + x.shape().to_string() + ": cs_prev " +
                            cs.shape().to_string() + ", h_prev " + h.shape().to_string() + ", w " +
                            w.shape().to_string() + ", b " + b.shape().to_string() +
                            ", peepholes " + in[4].shape().to_string());
  return d;
}

class lstm_block_cell_kernel : public kernel {
public:
  explicit lstm_block_cell_kernel(const kernel_construction& c)
      : forget_bias_(float(c.attr<double>("forget_bias"))),
        cell_clip_(float(c.attr<double>("cell_clip"))), peephole_(c.attr<bool>("use_peephole")) {}

  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto d, dims_of(ctx.inputs()));
    int64_t n = d.batch, c = d.cell;
    const float* x = ctx.input(0).data<float>();
    const float* cs_prev = ctx.input(1).data<float>();
    const float* h_prev = ctx.input(2).data<float>();
    const float* w = ctx.input(3).data<float>();
    const float *wci = ctx.input(4).data<float>(), *wcf = ctx.input(5).data<float>(),
                *wco = ctx.input(6).data<float>();
    const float* b = ctx.input(7).data<float>();
    float* out[7];
    for (int o = 0; o < 7; ++o)
      out[o] = ctx.allocate_output(o, dtype::f32, shape{n, c}).data<float>();
    std::vector<float> gates(size_t(n * 4 * c));
    for (int64_t r = 0; r < n; ++r)
      std::copy(b, b + 4 * c, gates.data() + r * 4 * c);
    if (n > 0 && c > 0) {
      cpu_device* pool = ctx.has_cpu() ? &ctx.cpu() : nullptr;
      if (d.input > 0)
        parallel_sgemm(pool, false, false, n, 4 * c, d.input, 1.f, x, d.input, w, 4 * c, 1.f,
                       gates.data(), 4 * c);
      parallel_sgemm(pool, false, false, n, 4 * c, c, 1.f, h_prev, c, w + d.input * 4 * c, 4 * c,
                     1.f, gates.data(), 4 * c);
    }
    for (int64_t r = 0; r < n; ++r) {
      const float* gr = gates.data() + r * 4 * c;
      for (int64_t j = 0; j < c; ++j) {
        int64_t at = r * c + j;
        float csp = cs_prev[at];
        float i = sigmoid(gr[j] + (peephole_ ? csp * wci[j] : 0.f));
        float ci = std::tanh(gr[c + j]);
        float f = sigmoid(gr[2 * c + j] + forget_bias_ + (peephole_ ? csp * wcf[j] : 0.f));
        float cs = ci * i + csp * f;
        if (cell_clip_ > 0)
          cs = std::clamp(cs, -cell_clip_, cell_clip_);
        float o = sigmoid(gr[3 * c + j] + (peephole_ ? cs * wco[j] : 0.f));
        float co = std::tanh(cs);
        out[0][at] = i, out[1][at] = cs, out[2][at] = f, out[3][at] = o;
        out[4][at] = ci, out[5][at] = co, out[6][at] = co * o;
      }
    }
    return {};
  }

private:
  float forget_bias_, cell_clip_;
  bool peephole_;
};

class lstm_block_cell_grad_kernel : public kernel {
public:
  explicit lstm_block_cell_grad_kernel(const kernel_construction& c)
      : peephole_(c.attr<bool>("use_peephole")) {}

  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto d, dims_of(ctx.inputs()));
    int64_t n = d.batch, c = d.cell;
    for (int k = 8; k < 16; ++k)
      if (!(ctx.input(k).shape() == shape{n, c}))
        return invalid_argument("input " + std::to_string(k) + " has shape " +
                                ctx.input(k).shape().to_string() + ", expected " +
                                shape{n, c}.to_string());
    auto in = [&](int k) { return ctx.input(k).data<float>(); };
    const float *cs_prev = in(1), *wci = in(4), *wcf = in(5), *wco = in(6);
    const float *i = in(8), *cs = in(9), *f = in(10), *o = in(11), *ci = in(12), *co = in(13);
    const float *cs_grad = in(14), *h_grad = in(15);
    float* cs_prev_grad = ctx.allocate_output(0, dtype::f32, shape{n, c}).data<float>();
    float* dicfo = ctx.allocate_output(1, dtype::f32, shape{n, 4 * c}).data<float>();
    float* wc_grad[3];
    for (int k = 0; k < 3; ++k) {
      wc_grad[k] = ctx.allocate_output(2 + k, dtype::f32, shape{c}).data<float>();
      std::fill_n(wc_grad[k], c, 0.f);
    }
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < c; ++j) {
        int64_t at = r * c + j;
        float d_o = o[at] * (1 - o[at]) * h_grad[at] * co[at];
        float dcs = (1 - co[at] * co[at]) * h_grad[at] * o[at] + cs_grad[at];
        if (peephole_)
          dcs += d_o * wco[j];
        float dci = (1 - ci[at] * ci[at]) * dcs * i[at];
        float df = f[at] * (1 - f[at]) * dcs * cs_prev[at];
        float di = i[at] * (1 - i[at]) * dcs * ci[at];
        float* g = dicfo + r * 4 * c;
        g[j] = di, g[c + j] = dci, g[2 * c + j] = df, g[3 * c + j] = d_o;
        cs_prev_grad[at] = dcs * f[at] + (peephole_ ? di * wci[j] + df * wcf[j] : 0.f);
        if (peephole_) {
          wc_grad[0][j] += di * cs_prev[at];
          wc_grad[1][j] += df * cs_prev[at];
          wc_grad[2][j] += d_o * cs[at];
        }
      }
    return {};
  }

private:
  bool peephole_;
};

} // namespace

void register_lstm_block_kernels(kernel_registry& reg) {
  reg.add("LSTMBlockCell", device_type::cpu, {dtype::f32}, make_kernel<lstm_block_cell_kernel>);
  reg.add("LSTMBlockCellGrad", device_type::cpu, {dtype::f32},
          make_kernel<lstm_block_cell_grad_kernel>);
}

} // namespace runnel
