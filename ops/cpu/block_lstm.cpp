// BlockLSTM and BlockLSTMGrad on the CPU (float32): the LSTM cell over a whole time-major
// sequence in one op. The input's half of every step's gates is one product over all steps up
// front; each step then adds h_prev · w_h and runs the element-wise part (ops/cpu/lstm_math.hpp).
// Backwards, only the recurrence (h_prev's gradient) runs step by step: the gradients of x, w and
// b are one product each over the gates' gradients of every step. Steps at or past seq_len_max
// output zeros and get no gradient, as TensorFlow's.
#include <algorithm>
#include <cstring>

#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/cpu/lstm_math.hpp"

namespace runnel {
namespace {

struct block_dims {
  int64_t steps, time, batch, input, cell; // steps: min(seq_len_max, time)
};

result<block_dims> block_dims_of(const kernel_context& ctx) {
  const tensor &len = ctx.input(0), &x = ctx.input(1), &cs = ctx.input(2), &h = ctx.input(3),
               &w = ctx.input(4), &b = ctx.input(8);
  if (len.rank() != 0 || x.rank() != 3 || cs.rank() != 2 || h.rank() != 2 || w.rank() != 2 ||
      b.rank() != 1)
    return invalid_argument("seq_len_max must be a scalar, x [time, batch, input], cs_prev and "
                            "h_prev [batch, cell], w a matrix and b a vector; got " +
                            len.shape().to_string() + ", " + x.shape().to_string() + ", " +
                            cs.shape().to_string() + ", " + h.shape().to_string() + ", " +
                            w.shape().to_string() + ", " + b.shape().to_string());
  block_dims d{0, x.dim(0), x.dim(1), x.dim(2), cs.dim(1)};
  bool ok = cs.dim(0) == d.batch && h.dim(0) == d.batch && h.dim(1) == d.cell &&
            w.dim(0) == d.input + d.cell && w.dim(1) == 4 * d.cell && b.dim(0) == 4 * d.cell;
  for (int i : {5, 6, 7})
    ok = ok && ctx.input(i).rank() == 1 && ctx.input(i).dim(0) == d.cell;
  if (!ok)
    return invalid_argument("shapes do not fit an LSTM cell of " + std::to_string(d.cell) +
                            " units on x " + x.shape().to_string() + ": h_prev " +
                            h.shape().to_string() + ", w " + w.shape().to_string() + ", b " +
                            b.shape().to_string() + ", peepholes " +
                            ctx.input(5).shape().to_string());
  int64_t max = len.data<int64_t>()[0];
  if (max < 0)
    return invalid_argument("seq_len_max is " + std::to_string(max) + ", must be >= 0");
  d.steps = std::min(max, d.time);
  return d;
}

/// Runs fn(r0, r1) over blocks of a step's rows on the device's pool.
void over_rows(kernel_context& ctx, int64_t rows, int64_t cell,
               const std::function<void(int64_t, int64_t)>& fn) {
  if (ctx.has_cpu())
    ctx.cpu().parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, cell)), fn);
  else
    fn(0, rows);
}

class block_lstm_kernel : public kernel {
public:
  explicit block_lstm_kernel(const kernel_construction& c) {
    p_.forget_bias = float(c.attr<double>("forget_bias"));
    p_.cell_clip = float(c.attr<double>("cell_clip"));
    p_.peephole = c.attr<bool>("use_peephole");
  }

  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto d, block_dims_of(ctx));
    int64_t n = d.batch, c = d.cell, step = n * c;
    auto p = p_;
    p.wci = ctx.input(5).data<float>(), p.wcf = ctx.input(6).data<float>();
    p.wco = ctx.input(7).data<float>();
    const float *x = ctx.input(1).data<float>(), *w = ctx.input(4).data<float>(),
                *b = ctx.input(8).data<float>();
    float* out[7];
    for (int o = 0; o < 7; ++o) {
      out[o] = ctx.allocate_output(o, dtype::f32, shape{d.time, n, c}).data<float>();
      std::fill(out[o] + d.steps * step, out[o] + d.time * step, 0.f);
    }
    if (d.steps == 0 || step == 0)
      return {};
    cpu_device* pool = ctx.has_cpu() ? &ctx.cpu() : nullptr;
    // Every step's gates: b + x_t · w_x for all steps at once, then + h_prev · w_h per step.
    tensor gates(dtype::f32, shape{d.steps * n, 4 * c});
    float* g = gates.data<float>();
    for (int64_t r = 0; r < d.steps * n; ++r)
      std::copy(b, b + 4 * c, g + r * 4 * c);
    if (d.input > 0)
      parallel_sgemm(pool, false, false, d.steps * n, 4 * c, d.input, 1.f, x, d.input, w, 4 * c,
                     1.f, g, 4 * c);
    for (int64_t t = 0; t < d.steps; ++t) {
      const float* cs_prev = t == 0 ? ctx.input(2).data<float>() : out[1] + (t - 1) * step;
      const float* h_prev = t == 0 ? ctx.input(3).data<float>() : out[6] + (t - 1) * step;
      float* gt = g + t * n * 4 * c;
      parallel_sgemm(pool, false, false, n, 4 * c, c, 1.f, h_prev, c, w + d.input * 4 * c, 4 * c,
                     1.f, gt, 4 * c);
      over_rows(ctx, n, c, [&](int64_t r0, int64_t r1) {
        float* rows_out[7];
        for (int o = 0; o < 7; ++o)
          rows_out[o] = out[o] + t * step + r0 * c;
        lstm_math::forward(p, r1 - r0, c, gt + r0 * 4 * c, cs_prev + r0 * c, rows_out);
      });
    }
    return {};
  }

private:
  lstm_math::params p_{};
};

class block_lstm_grad_kernel : public kernel {
public:
  explicit block_lstm_grad_kernel(const kernel_construction& c) {
    p_.peephole = c.attr<bool>("use_peephole");
  }

  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto d, block_dims_of(ctx));
    int64_t n = d.batch, c = d.cell, in = d.input, step = n * c;
    for (int k = 9; k < 18; ++k)
      if (!(ctx.input(k).shape() == shape{d.time, n, c}))
        return invalid_argument("input " + std::to_string(k) + " has shape " +
                                ctx.input(k).shape().to_string() + ", expected " +
                                shape{d.time, n, c}.to_string());
    auto input = [&](int k) { return ctx.input(k).data<float>(); };
    auto p = p_;
    p.wci = input(5), p.wcf = input(6), p.wco = input(7);
    const float *x = input(1), *w = input(4);
    float* out[8];
    for (int o = 0; o < 8; ++o) {
      tensor& t = ctx.allocate_output(o, dtype::f32, ctx.input(o + 1).shape());
      out[o] = t.data<float>();
      std::fill_n(out[o], t.num_elements(), 0.f);
    }
    float *x_grad = out[0], *cs_prev_grad = out[1], *h_prev_grad = out[2], *w_grad = out[3];
    float* wc_grad[3] = {out[4], out[5], out[6]};
    if (d.steps == 0 || step == 0)
      return {};
    cpu_device* pool = ctx.has_cpu() ? &ctx.cpu() : nullptr;
    tensor dicfo_all(dtype::f32, shape{d.steps * n, 4 * c});
    tensor sums(dtype::f32, shape{3, step}); // the gradients reaching cs and h, cs_prev's
    float* dicfo = dicfo_all.data<float>();
    float *cs_total = sums.data<float>(), *h_total = cs_total + step, *cs_back = h_total + step;
    // cs_prev_grad and h_prev_grad carry the recurrence's gradients from step t+1 to step t.
    for (int64_t t = d.steps - 1; t >= 0; --t) {
      const float* act[6];
      for (int k = 0; k < 6; ++k)
        act[k] = input(9 + k) + t * step;
      const float* cs_prev = t == 0 ? input(2) : input(10) + (t - 1) * step;
      const float *cs_grad = input(16) + t * step, *h_grad = input(17) + t * step;
      float* dt = dicfo + t * n * 4 * c;
      for (int64_t e = 0; e < step; ++e) {
        cs_total[e] = cs_grad[e] + cs_prev_grad[e];
        h_total[e] = h_grad[e] + h_prev_grad[e];
      }
      lstm_math::backward(p, n, c, act, cs_prev, cs_total, h_total, dt, cs_back, wc_grad);
      std::memcpy(cs_prev_grad, cs_back, size_t(step) * sizeof(float));
      parallel_sgemm(pool, false, true, n, c, 4 * c, 1.f, dt, 4 * c, w + in * 4 * c, 4 * c, 0.f,
                     h_prev_grad, c);
    }
    // x's, w's and b's gradients over every step at once.
    if (in > 0) {
      parallel_sgemm(pool, false, true, d.steps * n, in, 4 * c, 1.f, dicfo, 4 * c, w, 4 * c, 0.f,
                     x_grad, in);
      parallel_sgemm(pool, true, false, in, 4 * c, d.steps * n, 1.f, x, in, dicfo, 4 * c, 0.f,
                     w_grad, 4 * c);
    }
    float* wh_grad = w_grad + in * 4 * c; // h_prev for step 0, h of step t-1 after
    parallel_sgemm(pool, true, false, c, 4 * c, n, 1.f, input(3), c, dicfo, 4 * c, 0.f, wh_grad,
                   4 * c);
    if (d.steps > 1)
      parallel_sgemm(pool, true, false, c, 4 * c, (d.steps - 1) * n, 1.f, input(15), c,
                     dicfo + n * 4 * c, 4 * c, 1.f, wh_grad, 4 * c);
    float* b_grad = out[7];
    for (int64_t r = 0; r < d.steps * n; ++r)
      for (int64_t j = 0; j < 4 * c; ++j)
        b_grad[j] += dicfo[r * 4 * c + j];
    return {};
  }

private:
  lstm_math::params p_{};
};

} // namespace

RUNNEL_KERNEL_FAMILY_PART(lstm_block, sequence) {
  reg.add("BlockLSTM", device_type::cpu, {dtype::f32}, make_kernel<block_lstm_kernel>);
  reg.add("BlockLSTMGrad", device_type::cpu, {dtype::f32}, make_kernel<block_lstm_grad_kernel>);
}

} // namespace runnel
