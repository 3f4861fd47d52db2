#pragma once
// In-graph replication: one client builds a copy of the model (a tower) per device or worker task
// and averages their gradients, TensorFlow's multi-tower pattern.
//
//   auto w = variable(g, ...);                       // shared: create the variables first
//   auto t = build_towers(g, {"/device:cpu:0", "/device:cpu:1"}, [&](int i) {
//     return loss_of(split_x[i], split_y[i], w);     // tower i's loss, on device i
//   }, opt);
//   operation train = opt.apply_gradients(t.grads_and_vars, &global_step);
//   s.run(feeds, {t.mean_loss}, {train});
//
// Each tower is built under a device scope (its device) and a name scope ("tower_<i>"); its
// gradients are computed there. The mean of the towers' gradients of each variable is computed
// next to the variable (one transfer per tower and variable, none back), dense gradients with
// add_n, indexed slices by concatenation with their values scaled by 1/n. With the towers' losses
// being means over equal shares of a batch, the update equals one tower's on the whole batch.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runnel/ops/train/optimizers.hpp"

namespace runnel {

struct towers {
  std::vector<output> losses; ///< per tower
  output mean_loss;           ///< their mean
  /// Averaged gradient and variable, for optimizer::apply_gradients.
  std::vector<std::pair<gradient_value, output>> grads_and_vars;
};

/// Builds `model(i)` (returning tower i's scalar loss) once per entry of `devices`; the
/// gradients are `opt`'s over `var_list` (empty: the trainable variables). Throws on an empty
/// device list or a tower whose loss depends on none of the variables.
towers build_towers(graph& g, const std::vector<std::string>& devices,
                    const std::function<output(int tower)>& model, optimizer& opt,
                    std::vector<output> var_list = {});

} // namespace runnel
