// GRUBlockCell's gradient, from its outputs r, u, c and the gradient of h (what TensorFlow's
// GRUBlockCellGrad computes; the gradients of r, u and c as outputs are not propagated, as in
// TensorFlow), written with the builder's ops:
//   dc̄ = dh ∘ (1 − u) ∘ (1 − c²)          dū = dh ∘ (h_prev − c) ∘ u ∘ (1 − u)
//   [dx₁, d(r∘h)] = dc̄ · w_cᵀ             dr̄ = d(r∘h) ∘ h_prev ∘ r ∘ (1 − r)
//   [dx₂, dh₂] = [dr̄, dū] · w_ruᵀ
//   dx = dx₁ + dx₂    dh_prev = dh ∘ u + d(r∘h) ∘ r + dh₂
//   dw_ru = [x, h_prev]ᵀ · [dr̄, dū]    dw_c = [x, r ∘ h_prev]ᵀ · dc̄    db = column sums
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

namespace {

std::vector<output> gru_block_cell_grad(const gradient_context& c) {
  auto x = c.input(0), h_prev = c.input(1), w_ru = c.input(2), w_c = c.input(3);
  auto r = c.out(0), u = c.out(1), cand = c.out(2);
  auto dh = c.grad(3);
  const shape& xs = x.shape();
  if (!xs.has_known_rank() || xs.rank() != 2 || xs[1] < 0)
    throw error(unimplemented("gradient of GRUBlockCell '" + c.n.name +
                              "' needs x's input size, got " + xs.to_string()));
  int64_t input = xs[1];
  auto one = ones_like(u);
  auto dc_bar = dh * (one - u) * (one - cand * cand);
  auto du_bar = dh * (h_prev - cand) * u * (one - u);
  auto dxrh = matmul(dc_bar, w_c, {.transpose_b = true});
  auto d_rh = slice(dxrh, {0, input}, {-1, -1});
  auto dr_bar = d_rh * h_prev * r * (one - r);
  auto dru = concat({dr_bar, du_bar}, 1);
  auto dxh = matmul(dru, w_ru, {.transpose_b = true});
  auto dx = slice(dxrh, {0, 0}, {-1, input}) + slice(dxh, {0, 0}, {-1, input});
  auto dh_prev = dh * u + d_rh * r + slice(dxh, {0, input}, {-1, -1});
  auto dw_ru = matmul(concat({x, h_prev}, 1), dru, {.transpose_a = true});
  auto dw_c = matmul(concat({x, r * h_prev}, 1), dc_bar, {.transpose_a = true});
  return {dx, dh_prev, dw_ru, dw_c, sum(dru, {0}), sum(dc_bar, {0})};
}

} // namespace

RUNNEL_GRADIENT_FAMILY(gru_block) {
  reg.add("GRUBlockCell", gru_block_cell_grad);
}

} // namespace runnel
