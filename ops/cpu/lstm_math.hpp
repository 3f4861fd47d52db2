#pragma once
// The arithmetic of one LSTM step (ops/layers/lstm_block.hpp has the formulas), shared by the
// LSTMBlockCell kernels and BlockLSTM's, which loops it over a sequence. Kernel sources only (it
// includes Eigen).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <Eigen/Core>

#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/cpu/unary_wide.hpp"

namespace runnel::lstm_math {

/// The cell's attributes and peephole weights (each [cell]; read only with `peephole`).
struct params {
  float forget_bias, cell_clip;
  bool peephole;
  const float *wci, *wcf, *wco;
};

/// out [n, width] = b + x · w[:input] + s · w[input:] for x [n, input], s [n, state] and
/// w [input + state, width]: one product per half of w (no concatenated copy), rows split over
/// `pool`. The gates of an LSTM (width 4c) and of a GRU (ops/cpu/gru_block.cpp).
inline void affine_halves(cpu_device* pool, int64_t n, int64_t input, int64_t state, int64_t width,
                          const float* x, const float* s, const float* w, const float* b,
                          float* out) {
  for (int64_t r = 0; r < n; ++r)
    std::copy(b, b + width, out + r * width);
  if (n == 0 || width == 0)
    return;
  if (input > 0)
    parallel_sgemm(pool, false, false, n, width, input, 1.f, x, input, w, width, 1.f, out, width);
  if (state > 0)
    parallel_sgemm(pool, false, false, n, width, state, 1.f, s, state, w + input * width, width,
                   1.f, out, width);
}

/// gates [n, 4c] = b + x · w[:input] + h_prev · w[input:].
inline void gates(cpu_device* pool, int64_t n, int64_t input, int64_t c, const float* x,
                  const float* h_prev, const float* w, const float* b, float* out) {
  affine_halves(pool, n, input, c, 4 * c, x, h_prev, w, b, out);
}

/// The element-wise part of a step: out = {i, cs, f, o, ci, co, h}, each [n, c]. A row at a
/// time: the gates' pre-activations go into their outputs, which are then activated in place by
/// the unary rows' vectorised code (ops/cpu/unary_wide.hpp; scalar tanhf was a tenth of the g2p
/// app's training time).
inline void forward(const params& p, int64_t n, int64_t c, const float* gates, const float* cs_prev,
                    float* const out[7]) {
  using array = Eigen::Array<float, Eigen::Dynamic, 1>;
  using in_row = Eigen::Map<const array>;
  using out_row = Eigen::Map<array>;
  for (int64_t r = 0; r < n; ++r) {
    const float* gr = gates + r * 4 * c;
    int64_t at = r * c;
    in_row csp(cs_prev + at, c), gi(gr, c), gci(gr + c, c), gf(gr + 2 * c, c), go(gr + 3 * c, c);
    out_row i(out[0] + at, c), cs(out[1] + at, c), f(out[2] + at, c), o(out[3] + at, c),
        ci(out[4] + at, c), co(out[5] + at, c), h(out[6] + at, c);
    if (p.peephole) {
      in_row wci(p.wci, c), wcf(p.wcf, c);
      i = gi + csp * wci;
      f = gf + p.forget_bias + csp * wcf;
    } else {
      i = gi;
      f = gf + p.forget_bias;
    }
    unary_f32(unary_op::Sigmoid, i.data(), i.data(), c);
    unary_f32(unary_op::Sigmoid, f.data(), f.data(), c);
    ci = gci;
    unary_f32(unary_op::Tanh, ci.data(), ci.data(), c);
    cs = ci * i + csp * f;
    if (p.cell_clip > 0)
      cs = cs.max(-p.cell_clip).min(p.cell_clip);
    if (p.peephole)
      o = go + cs * in_row(p.wco, c);
    else
      o = go;
    unary_f32(unary_op::Sigmoid, o.data(), o.data(), c);
    co = cs;
    unary_f32(unary_op::Tanh, co.data(), co.data(), c);
    h = co * o;
  }
}

/// The element-wise part of a step's gradient from the step's activations act = {i, cs, f, o,
/// ci, co} and the gradients reaching its cs and h: the gates' gradient dicfo [n, 4c] and
/// cs_prev's; the peepholes' gradients are added to wc_grad (each [c]).
inline void backward(const params& p, int64_t n, int64_t c, const float* const act[6],
                     const float* cs_prev, const float* cs_grad, const float* h_grad, float* dicfo,
                     float* cs_prev_grad, float* const wc_grad[3]) {
  const float *i = act[0], *cs = act[1], *f = act[2], *o = act[3], *ci = act[4], *co = act[5];
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < c; ++j) {
      int64_t at = r * c + j;
      float d_o = o[at] * (1 - o[at]) * h_grad[at] * co[at];
      float dcs = (1 - co[at] * co[at]) * h_grad[at] * o[at] + cs_grad[at];
      if (p.peephole)
        dcs += d_o * p.wco[j];
      float dci = (1 - ci[at] * ci[at]) * dcs * i[at];
      float df = f[at] * (1 - f[at]) * dcs * cs_prev[at];
      float di = i[at] * (1 - i[at]) * dcs * ci[at];
      float* g = dicfo + r * 4 * c;
      g[j] = di, g[c + j] = dci, g[2 * c + j] = df, g[3 * c + j] = d_o;
      cs_prev_grad[at] = dcs * f[at] + (p.peephole ? di * p.wci[j] + df * p.wcf[j] : 0.f);
      if (p.peephole) {
        wc_grad[0][j] += di * cs_prev[at];
        wc_grad[1][j] += df * cs_prev[at];
        wc_grad[2][j] += d_o * cs[at];
      }
    }
}

} // namespace runnel::lstm_math
