#include "runnel/ops/train/towers.hpp"

#include "runnel/ops/graph/builder.hpp"

namespace runnel {

towers build_towers(graph& g, const std::vector<std::string>& devices,
                    const std::function<output(int tower)>& model, optimizer& opt,
                    std::vector<output> var_list) {
  if (devices.empty())
    throw error(invalid_argument("build_towers: no devices"));
  towers out;
  std::vector<std::vector<std::pair<gradient_value, output>>> per_tower;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto scope = g.name_scope("tower_" + std::to_string(i));
    auto dev = g.device(devices[i]);
    output loss = model(int(i));
    out.losses.push_back(loss);
    per_tower.push_back(opt.compute_gradients(loss, var_list));
    if (per_tower.back().empty())
      throw error(invalid_argument("build_towers: the loss of tower " + std::to_string(i) + " ('" +
                                   loss.name() + "') depends on none of the variables"));
  }
  double n = double(devices.size());
  {
    auto scope = g.name_scope("towers");
    out.mean_loss = mul(add_n(out.losses), filled(g, out.losses[0].type(), shape{}, 1.0 / n), "mean_loss");
  }
  // Per variable (in the first tower's order), the towers' gradients averaged next to it.
  for (auto& [first_grad, var] : per_tower[0]) {
    std::vector<gradient_value> grads;
    for (auto& tower : per_tower)
      for (auto& [grad, v] : tower)
        if (v.node_id() == var.node_id())
          grads.push_back(grad);
    if (grads.size() != per_tower.size())
      throw error(invalid_argument("build_towers: variable '" + var.node().name + "' has a "
                                   "gradient in " + std::to_string(grads.size()) + " of " +
                                   std::to_string(per_tower.size()) + " towers"));
    auto scope = g.name_scope("towers/average_" + var.node().name);
    auto col = g.colocate_with(var);
    auto inv = filled(g, var.type(), shape{}, 1.0 / n, "inv_towers");
    bool all_sparse = true;
    for (auto& gv : grads)
      all_sparse &= gv.is_sparse();
    if (all_sparse) {
      std::vector<indexed_slices> parts;
      for (auto& gv : grads)
        parts.push_back(gv.slices());
      auto joined = concat_slices(parts);
      joined.values = mul(joined.values, inv);
      out.grads_and_vars.emplace_back(gradient_value(joined), var);
    } else {
      std::vector<output> dense;
      for (auto& gv : grads)
        dense.push_back(gv.to_dense());
      out.grads_and_vars.emplace_back(gradient_value(mul(add_n(dense), inv)), var);
    }
  }
  return out;
}

} // namespace runnel
