#include "runnel/ops/train/mixed_precision.hpp"

namespace runnel {

output to_compute(output x, dtype t, std::string_view name) {
  if (x.type() == t || !is_floating(x.type()) || !is_floating(t))
    return x;
  return cast(x, t, name);
}

std::vector<std::pair<gradient_value, output>>
loss_scale_optimizer::compute_gradients(output loss, std::vector<output> var_list) {
  graph& g = loss.owner();
  if (loss.type() != dtype::f32)
    throw error(invalid_argument("loss_scale_optimizer: the loss '" + loss.node().name +
                                 "' is " + std::string(runnel::name(loss.type())) +
                                 "; compute it in float32 (to_compute(logits, dtype::f32))"));
  auto s = g.name_scope("loss_scale");
  scale_ = variable(g, constant(g, float(options_.initial_scale)), "scale", false);
  good_steps_ = variable(g, constant(g, int64_t(0)), "good_steps", false);
  auto grads = inner_.compute_gradients(loss * scale_.value, std::move(var_list));

  // Unscale; a gradient is finite when gradient * 0 sums to 0 (an infinity or NaN gives NaN).
  auto inverse = reciprocal(scale_.value);
  std::vector<output> checks;
  for (auto& [grad, var] : grads) {
    auto values = grad.values();
    grad = grad.with_values(values * cast(inverse, values.type()));
    checks.push_back(cast(sum(grad.values() * 0.0), dtype::f32));
  }
  finite_ = equal(add_n(checks), constant(g, 0.0f), "finite");
  for (auto& [grad, var] : grads) {
    auto v = grad.values();
    grad = grad.with_values(select(finite_, v, zeros_like(v)));
  }
  return grads;
}

operation loss_scale_optimizer::apply_gradients(
    const std::vector<std::pair<gradient_value, output>>& grads, const graph_variable* global_step) {
  if (!finite_.valid())
    throw error(failed_precondition("loss_scale_optimizer: apply_gradients needs the gradients "
                                    "of its own compute_gradients"));
  graph& g = finite_.owner();
  operation apply = inner_.apply_gradients(grads, global_step);
  if (!options_.dynamic)
    return apply;
  // After the update: grow or shrink the scale.
  auto s = g.name_scope("loss_scale");
  auto deps = g.control_dependencies({apply});
  auto next_good = select(finite_, good_steps_.value + 1.0, constant(g, int64_t(0)));
  auto grow = greater_equal(next_good, constant(g, options_.growth_interval));
  auto grown = select(grow, scale_.value * 2.0f, scale_.value);
  auto shrunk = maximum(scale_.value * 0.5f, constant(g, 1.0f));
  auto new_scale = assign(scale_, select(finite_, grown, shrunk));
  auto new_good = assign(good_steps_, select(grow, constant(g, int64_t(0)), next_good));
  return group(g, {apply, operation(new_scale), operation(new_good)}, "update");
}

operation loss_scale_optimizer::minimize(output loss, std::vector<output> var_list,
                                         const graph_variable* global_step) {
  return apply_gradients(compute_gradients(loss, std::move(var_list)), global_step);
}

} // namespace runnel
