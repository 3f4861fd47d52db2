#include "runnel/ops/train/optimizers.hpp"

namespace runnel {
namespace {

output scalar(graph& g, dtype t, double v, std::string_view name) {
  return filled(g, t, shape{}, v, name);
}

std::vector<output> trainable(graph& g) {
  std::vector<output> out;
  for (int id : g.collection("trainable_variables"))
    out.emplace_back(&g, endpoint{id, 0});
  return out;
}

} // namespace

output learning_rate::as_output(graph& g, dtype t) const {
  if (tensor.valid())
    return tensor.type() == t ? tensor : cast(tensor, t);
  return scalar(g, t, value, "learning_rate");
}

std::vector<std::pair<gradient_value, output>>
optimizer::compute_gradients(output loss, std::vector<output> var_list) {
  graph& g = loss.owner();
  if (var_list.empty())
    var_list = trainable(g);
  if (var_list.empty())
    throw error(invalid_argument(name_ + ": there are no trainable variables to optimize"));
  for (auto& v : var_list)
    if (v.node().op != "VariableV2")
      throw error(invalid_argument(name_ + ": '" + v.name() + "' is not a variable (op " +
                                   v.node().op + "); pass the variable's ref output"));
  auto grads = gradient_values({loss}, var_list);
  std::vector<std::pair<gradient_value, output>> out;
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i].valid())
      out.emplace_back(grads[i], var_list[i]);
  return out;
}

operation optimizer::apply_gradients(
    const std::vector<std::pair<gradient_value, output>>& grads_and_vars,
    const graph_variable* global_step, std::string_view name) {
  if (grads_and_vars.empty())
    throw error(invalid_argument(name_ + ": no gradients to apply (does the loss depend on "
                                         "any of the variables?)"));
  graph& g = grads_and_vars[0].second.owner();
  auto no_deps = g.control_dependencies({});
  auto scope = g.name_scope(name.empty() ? name_ : name);
  prepare(g, grads_and_vars[0].second.type());
  std::vector<operation> updates;
  for (auto& [grad, var] : grads_and_vars) {
    auto vs = g.name_scope("update_" + var.node().name);
    auto col = g.colocate_with(var);
    updates.push_back(grad.is_sparse() ? apply_sparse(g, var, grad.slices())
                                       : apply_one(g, var, grad.to_dense()));
  }
  auto done = finish(g, updates);
  if (!global_step)
    return group(g, done, "update");
  auto deps = g.control_dependencies(done);
  auto col = g.colocate_with(global_step->ref);
  auto one = filled(g, global_step->ref.type(), shape{}, 1.0, "one");
  return operation(assign_add(*global_step, one, "update"));
}

operation optimizer::minimize(output loss, std::vector<output> var_list,
                              const graph_variable* global_step, std::string_view name) {
  return apply_gradients(compute_gradients(loss, std::move(var_list)), global_step, name);
}

graph_variable optimizer::slot(graph& g, output var, const std::string& slot_name, double init) {
  // Slots are named after their variable ("w/Adam"), outside the optimizer's scope.
  auto root = g.name_scope("");
  auto slot_var_name = var.node().name + "/" + slot_name;
  shape s = var.node().output_shapes[0];
  if (!s.is_fully_defined())
    throw error(invalid_argument(name_ + ": variable '" + var.node().name + "' has shape " +
                                 s.to_string() + "; slots need a fully defined shape"));
  auto initial = filled(g, var.type(), s, init, slot_var_name + "_init");
  return variable(g, initial, slot_var_name, /*trainable=*/false);
}

output gradient_descent_optimizer::apply_one(graph& g, output var, output grad) {
  auto lr = lr_.as_output(g, var.type());
  return g.build("ApplyGradientDescent", "ApplyGradientDescent", {var.ep(), lr.ep(), grad.ep()})[0];
}

output gradient_descent_optimizer::apply_sparse(graph& g, output var, const indexed_slices& grad) {
  auto lr = lr_.as_output(g, var.type());
  return g.build("SparseApplyGradientDescent", "SparseApplyGradientDescent",
                 {var.ep(), lr.ep(), grad.values.ep(), grad.indices.ep()})[0];
}

output momentum_optimizer::apply_one(graph& g, output var, output grad) {
  auto accum = slot(g, var, "Momentum");
  auto lr = lr_.as_output(g, var.type());
  auto mu = scalar(g, var.type(), momentum_, "momentum");
  return g.build("ApplyMomentum", "ApplyMomentum",
                 {var.ep(), accum.ref.ep(), lr.ep(), grad.ep(), mu.ep()},
                 {{"use_nesterov", nesterov_}})[0];
}

output momentum_optimizer::apply_sparse(graph& g, output var, const indexed_slices& grad) {
  auto accum = slot(g, var, "Momentum");
  auto lr = lr_.as_output(g, var.type());
  auto mu = scalar(g, var.type(), momentum_, "momentum");
  return g.build("SparseApplyMomentum", "SparseApplyMomentum",
                 {var.ep(), accum.ref.ep(), lr.ep(), grad.values.ep(), grad.indices.ep(), mu.ep()},
                 {{"use_nesterov", nesterov_}})[0];
}

output adagrad_optimizer::apply_one(graph& g, output var, output grad) {
  auto accum = slot(g, var, "Adagrad", initial_);
  auto lr = lr_.as_output(g, var.type());
  return g.build("ApplyAdagrad", "ApplyAdagrad", {var.ep(), accum.ref.ep(), lr.ep(), grad.ep()})[0];
}

output adagrad_optimizer::apply_sparse(graph& g, output var, const indexed_slices& grad) {
  auto accum = slot(g, var, "Adagrad", initial_);
  auto lr = lr_.as_output(g, var.type());
  return g.build("SparseApplyAdagrad", "SparseApplyAdagrad",
                 {var.ep(), accum.ref.ep(), lr.ep(), grad.values.ep(), grad.indices.ep()})[0];
}

output rmsprop_optimizer::apply_one(graph& g, output var, output grad) {
  auto ms = slot(g, var, "RMSProp", 1.0);
  auto mom = slot(g, var, "RMSProp_1");
  dtype t = var.type();
  return g.build("ApplyRMSProp", "ApplyRMSProp",
                 {var.ep(), ms.ref.ep(), mom.ref.ep(), lr_.as_output(g, t).ep(),
                  scalar(g, t, decay_, "rho").ep(), scalar(g, t, momentum_, "momentum").ep(),
                  scalar(g, t, epsilon_, "epsilon").ep(), grad.ep()})[0];
}

output rmsprop_optimizer::apply_sparse(graph& g, output var, const indexed_slices& grad) {
  auto ms = slot(g, var, "RMSProp", 1.0);
  auto mom = slot(g, var, "RMSProp_1");
  dtype t = var.type();
  return g.build("SparseApplyRMSProp", "SparseApplyRMSProp",
                 {var.ep(), ms.ref.ep(), mom.ref.ep(), lr_.as_output(g, t).ep(),
                  scalar(g, t, decay_, "rho").ep(), scalar(g, t, momentum_, "momentum").ep(),
                  scalar(g, t, epsilon_, "epsilon").ep(), grad.values.ep(),
                  grad.indices.ep()})[0];
}

void adam_optimizer::prepare(graph& g, dtype t) {
  auto scope = g.name_scope("");
  beta1_power_ = variable(g, scalar(g, t, beta1_, "beta1_power_init"), "beta1_power", false);
  beta2_power_ = variable(g, scalar(g, t, beta2_, "beta2_power_init"), "beta2_power", false);
}

std::vector<endpoint> adam_optimizer::adam_inputs(graph& g, output var) {
  auto m = slot(g, var, "Adam");
  auto v = slot(g, var, "Adam_1");
  dtype t = var.type();
  return {var.ep(),
          m.ref.ep(),
          v.ref.ep(),
          beta1_power_.value.ep(),
          beta2_power_.value.ep(),
          lr_.as_output(g, t).ep(),
          scalar(g, t, beta1_, "beta1").ep(),
          scalar(g, t, beta2_, "beta2").ep(),
          scalar(g, t, epsilon_, "epsilon").ep()};
}

output adam_optimizer::apply_one(graph& g, output var, output grad) {
  auto in = adam_inputs(g, var);
  in.push_back(grad.ep());
  return g.build("ApplyAdam", "ApplyAdam", in)[0];
}

output lazy_adam_optimizer::apply_sparse(graph& g, output var, const indexed_slices& grad) {
  auto in = adam_inputs(g, var);
  in.push_back(grad.values.ep());
  in.push_back(grad.indices.ep());
  return g.build("SparseApplyAdam", "SparseApplyAdam", in)[0];
}

std::vector<operation> adam_optimizer::finish(graph& g, const std::vector<operation>& updates) {
  auto deps = g.control_dependencies(updates);
  // Each power's product is computed where the power lives (as TensorFlow colocates them): on a
  // cluster, computed elsewhere it cost two more crossings at the end of every step.
  auto update = [&](graph_variable& power, double beta, const char* name) {
    auto col = g.colocate_with(power.ref);
    return operation(assign(power, power.value * beta, name));
  };
  return {update(beta1_power_, beta1_, "update_beta1_power"),
          update(beta2_power_, beta2_, "update_beta2_power")};
}

output exponential_decay(double lr, const graph_variable& global_step, double decay_steps,
                         double decay_rate, bool staircase, dtype t) {
  graph& g = global_step.ref.owner();
  auto scope = g.name_scope("ExponentialDecay");
  auto p = cast(global_step.value, t) / decay_steps;
  if (staircase)
    p = g.build("Floor", "Floor", {p.ep()})[0];
  return pow(scalar(g, t, decay_rate, "decay_rate"), p) * lr;
}

output piecewise_constant(const graph_variable& global_step, const std::vector<int64_t>& boundaries,
                          const std::vector<double>& values, dtype t) {
  graph& g = global_step.ref.owner();
  if (values.size() != boundaries.size() + 1)
    throw error(invalid_argument("piecewise_constant: " + std::to_string(values.size()) +
                                 " values for " + std::to_string(boundaries.size()) +
                                 " boundaries (need one more value than boundaries)"));
  auto scope = g.name_scope("PiecewiseConstant");
  auto step = cast(global_step.value, dtype::i64);
  output result = scalar(g, t, values.back(), "value");
  for (size_t i = boundaries.size(); i-- > 0;) {
    auto below = less_equal(step, constant(g, tensor::scalar<int64_t>(boundaries[i])));
    result = select(below, scalar(g, t, values[i], "value"), result);
  }
  return result;
}

} // namespace runnel
