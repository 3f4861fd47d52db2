// LSTMBlockCell and LSTMBlockCellGrad on the CPU (float32): the gates through one OpenBLAS
// product per half of w, then one pass over [batch, cell] for the element-wise part
// (ops/cpu/lstm_math.hpp; ops/layers/lstm_block.hpp has the formulas).
#include <algorithm>
#include <cmath>

#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/cpu/lstm_math.hpp"

namespace runnel {
namespace {

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

lstm_math::params params_of(const kernel_construction& c) {
  return {float(c.attr<double>("forget_bias")), float(c.attr<double>("cell_clip")),
          c.attr<bool>("use_peephole"), nullptr, nullptr, nullptr};
}

class lstm_block_cell_kernel : public kernel {
public:
  explicit lstm_block_cell_kernel(const kernel_construction& c) : p_(params_of(c)) {}

  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto d, dims_of(ctx.inputs()));
    int64_t n = d.batch, c = d.cell;
    auto p = p_;
    p.wci = ctx.input(4).data<float>(), p.wcf = ctx.input(5).data<float>();
    p.wco = ctx.input(6).data<float>();
    float* out[7];
    for (int o = 0; o < 7; ++o)
      out[o] = ctx.allocate_output(o, dtype::f32, shape{n, c}).data<float>();
    tensor gates(dtype::f32, shape{n, 4 * c});
    lstm_math::gates(ctx.has_cpu() ? &ctx.cpu() : nullptr, n, d.input, c,
                     ctx.input(0).data<float>(), ctx.input(2).data<float>(),
                     ctx.input(3).data<float>(), ctx.input(7).data<float>(), gates.data<float>());
    lstm_math::forward(p, n, c, gates.data<float>(), ctx.input(1).data<float>(), out);
    return {};
  }

private:
  lstm_math::params p_;
};

class lstm_block_cell_grad_kernel : public kernel {
public:
  explicit lstm_block_cell_grad_kernel(const kernel_construction& c) {
    p_.peephole = c.attr<bool>("use_peephole");
  }

  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto d, dims_of(ctx.inputs()));
    int64_t n = d.batch, c = d.cell;
    for (int k = 8; k < 16; ++k)
      if (!(ctx.input(k).shape() == shape{n, c}))
        return invalid_argument("input " + std::to_string(k) + " has shape " +
                                ctx.input(k).shape().to_string() + ", expected " +
                                shape{n, c}.to_string());
    auto in = [&](int k) { return ctx.input(k).data<float>(); };
    auto p = p_;
    p.wci = in(4), p.wcf = in(5), p.wco = in(6);
    const float* act[6] = {in(8), in(9), in(10), in(11), in(12), in(13)};
    float* cs_prev_grad = ctx.allocate_output(0, dtype::f32, shape{n, c}).data<float>();
    float* dicfo = ctx.allocate_output(1, dtype::f32, shape{n, 4 * c}).data<float>();
    float* wc_grad[3];
    for (int k = 0; k < 3; ++k) {
      wc_grad[k] = ctx.allocate_output(2 + k, dtype::f32, shape{c}).data<float>();
      std::fill_n(wc_grad[k], c, 0.f);
    }
    lstm_math::backward(p, n, c, act, in(1), in(14), in(15), dicfo, cs_prev_grad, wc_grad);
    return {};
  }

private:
  lstm_math::params p_{};
};

} // namespace

RUNNEL_KERNEL_FAMILY(lstm_block) {
  reg.add("LSTMBlockCell", device_type::cpu, {dtype::f32}, make_kernel<lstm_block_cell_kernel>);
  reg.add("LSTMBlockCellGrad", device_type::cpu, {dtype::f32},
          make_kernel<lstm_block_cell_grad_kernel>);
}

} // namespace runnel
