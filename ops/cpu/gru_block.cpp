// GRUBlockCell on the CPU (float32): two products through parallel_sgemm (one per half of each
// weight matrix, no concatenated copy) and element-wise passes (ops/defs/gru_block_ops.cpp has
// the formulas).
#include <cmath>

#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/cpu/lstm_math.hpp"

namespace runnel {
namespace {

class gru_block_cell_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor &x = ctx.input(0), &h = ctx.input(1), &w_ru = ctx.input(2), &w_c = ctx.input(3),
                 &b_ru = ctx.input(4), &b_c = ctx.input(5);
    bool ranks = x.rank() == 2 && h.rank() == 2 && w_ru.rank() == 2 && w_c.rank() == 2 &&
                 b_ru.rank() == 1 && b_c.rank() == 1;
    int64_t n = ranks ? x.dim(0) : 0, in = ranks ? x.dim(1) : 0, c = ranks ? h.dim(1) : 0;
    if (!ranks || h.dim(0) != n || w_ru.dim(0) != in + c || w_ru.dim(1) != 2 * c ||
        w_c.dim(0) != in + c || w_c.dim(1) != c || b_ru.dim(0) != 2 * c || b_c.dim(0) != c)
      return invalid_argument(
          "shapes do not fit a GRU cell on x " + x.shape().to_string() + ": h_prev " +
          h.shape().to_string() + ", w_ru " + w_ru.shape().to_string() + ", w_c " +
          w_c.shape().to_string() + ", b_ru " + b_ru.shape().to_string() + ", b_c " +
          b_c.shape().to_string() + " (w_ru [input + cell, 2 cell], w_c [input + cell, cell])");
    float* r = ctx.allocate_output(0, dtype::f32, shape{n, c}).data<float>();
    float* u = ctx.allocate_output(1, dtype::f32, shape{n, c}).data<float>();
    float* cand = ctx.allocate_output(2, dtype::f32, shape{n, c}).data<float>();
    float* out = ctx.allocate_output(3, dtype::f32, shape{n, c}).data<float>();
    cpu_device* pool = ctx.has_cpu() ? &ctx.cpu() : nullptr;
    const float* hp = h.data<float>();
    // ru = b_ru + x · w_ru[:in] + h_prev · w_ru[in:]
    tensor ru(dtype::f32, shape{n, 2 * c});
    lstm_math::affine_halves(pool, n, in, c, 2 * c, x.data<float>(), hp, w_ru.data<float>(),
                             b_ru.data<float>(), ru.data<float>());
    tensor rh(dtype::f32, shape{n, c});
    // The gates through the widest vectors the CPU has (ops/cpu/unary_wide.hpp).
    using array = Eigen::Array<float, Eigen::Dynamic, 1>;
    for (int64_t i = 0; i < n; ++i) {
      const float* gates = ru.data<float>() + i * 2 * c;
      unary_f32(unary_op::Sigmoid, gates, r + i * c, c);
      unary_f32(unary_op::Sigmoid, gates + c, u + i * c, c);
      Eigen::Map<const array> rr(r + i * c, c), hrow(hp + i * c, c);
      Eigen::Map<array> rhr(rh.data<float>() + i * c, c);
      rhr = rr * hrow;
    }
    // c = tanh(b_c + x · w_c[:in] + (r ∘ h_prev) · w_c[in:])
    lstm_math::affine_halves(pool, n, in, c, c, x.data<float>(), rh.data<float>(),
                             w_c.data<float>(), b_c.data<float>(), cand);
    unary_f32(unary_op::Tanh, cand, cand, n * c);
    Eigen::Map<const array> cv(cand, n * c), uv(u, n * c), hv(hp, n * c);
    Eigen::Map<array> ov(out, n * c);
    ov = uv * hv + (1.f - uv) * cv;
    return {};
  }
};

} // namespace

RUNNEL_KERNEL_FAMILY(gru_block) {
  reg.add("GRUBlockCell", device_type::cpu, {dtype::f32},
          make_simple_kernel<gru_block_cell_kernel>);
}

} // namespace runnel
