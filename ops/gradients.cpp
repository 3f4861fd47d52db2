#include "ops/gradients.hpp"

#include <algorithm>

namespace runnel {

output gradient_context::grad(int i) const {
  if (grads[size_t(i)].valid())
    return grads[size_t(i)];
  return zeros_like(outputs[size_t(i)]);
}

void gradient_registry::add(const std::string& op, gradient_function fn) {
  fns_[op] = std::move(fn);
}
void gradient_registry::add_non_differentiable(const std::string& op) {
  none_[op] = true;
}
const gradient_function* gradient_registry::find(const std::string& op) const {
  auto it = fns_.find(op);
  return it == fns_.end() ? nullptr : &it->second;
}
bool gradient_registry::is_non_differentiable(const std::string& op) const {
  return none_.count(op) > 0;
}

const gradient_registry& builtin_gradients() {
  static const gradient_registry* reg = [] {
    auto* r = new gradient_registry;
    register_math_gradients(*r);
    register_nn_gradients(*r);
    return r;
  }();
  return *reg;
}

output sum_to_shape_of(output grad, output x) {
  graph& g = x.owner();
  const shape& xs = x.shape();
  const shape& gs = grad.shape();
  if (xs.is_fully_defined() && gs.is_fully_defined()) {
    if (xs == gs)
      return grad;
    // Static: sum the leading extra axes and the axes where x has 1.
    std::vector<int64_t> axes;
    int lead = gs.rank() - xs.rank();
    for (int d = 0; d < gs.rank(); ++d)
      if (d < lead || (xs[d - lead] == 1 && gs[d] != 1))
        axes.push_back(d);
    output s = axes.empty() ? grad : sum(grad, axes, false);
    return reshape(s, xs.dims());
  }
  if (xs.is_compatible_with(gs) && xs.rank() == gs.rank() && xs == gs)
    return grad;
  auto outs = g.build("BroadcastGradientArgs", "BroadcastGradientArgs",
                      {shape_of(x).ep(), shape_of(grad).ep()});
  return reshape(sum(grad, outs[0], false), shape_of(x));
}

namespace {

bool is_float(dtype t) {
  return t == dtype::f32 || t == dtype::f64 || t == dtype::f16 || t == dtype::bf16;
}

} // namespace

std::vector<output> gradients(const std::vector<output>& ys, const std::vector<output>& xs,
                              const std::vector<output>& grad_ys, gradient_options options) {
  if (ys.empty())
    throw error(invalid_argument("gradients: ys is empty"));
  graph& g = ys[0].owner();
  if (!grad_ys.empty() && grad_ys.size() != ys.size())
    throw error(invalid_argument("gradients: " + std::to_string(grad_ys.size()) + " grad_ys for " +
                                 std::to_string(ys.size()) + " ys"));
  int n = g.num_nodes();
  auto consumers = g.data_consumers();
  // Nodes reachable forward from the xs, and backward from the ys: only these get gradients.
  std::vector<char> from_x(static_cast<size_t>(n), 0), to_y(static_cast<size_t>(n), 0);
  std::vector<int> stack;
  for (auto& x : xs)
    stack.push_back(x.node_id());
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (from_x[size_t(v)]++)
      continue;
    for (auto [c, slot] : consumers[size_t(v)])
      stack.push_back(c);
  }
  for (auto& y : ys)
    stack.push_back(y.node_id());
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (to_y[size_t(v)]++)
      continue;
    for (auto e : g.at(v).inputs)
      stack.push_back(e.node);
  }

  std::map<endpoint, std::vector<output>> pending;
  auto scope = g.name_scope("gradients");
  auto no_deps = g.control_dependencies({});
  for (size_t i = 0; i < ys.size(); ++i)
    pending[ys[i].ep()].push_back(grad_ys.empty() ? ones_like(ys[i], "grad_ys") : grad_ys[i]);

  auto total = [&](endpoint e) -> output {
    auto it = pending.find(e);
    if (it == pending.end() || it->second.empty())
      return {};
    auto& list = it->second;
    if (list.size() == 1)
      return list[0];
    return add_n(list, "AddN");
  };
  auto& reg = builtin_gradients();
  std::vector<bool> is_x(static_cast<size_t>(n), false);
  for (auto& x : xs)
    is_x[size_t(x.node_id())] = true;

  // Node ids are a topological order: walking them backwards visits consumers first.
  std::map<endpoint, output> finished;
  for (int v = n - 1; v >= 0; --v) {
    if (!from_x[size_t(v)] || !to_y[size_t(v)])
      continue;
    const node& nd = g.at(v);
    gradient_context ctx{g, nd, {}, {}, {}};
    bool any = false;
    for (int o = 0; o < nd.num_outputs(); ++o) {
      output t = total({v, o});
      if (t.valid()) {
        any = true;
        finished[{v, o}] = t;
      }
      ctx.grads.push_back(t);
      ctx.outputs.emplace_back(&g, endpoint{v, o});
    }
    if (!any || nd.inputs.empty())
      continue;
    bool float_in = std::any_of(nd.inputs.begin(), nd.inputs.end(), [&](endpoint e) {
      return is_float(g.at(e.node).output_types[size_t(e.index)]);
    });
    if (nd.op == "StopGradient" || !float_in || reg.is_non_differentiable(nd.op))
      continue;
    auto* fn = reg.find(nd.op);
    if (!fn)
      throw error(unimplemented("gradients: no gradient is defined for op " + nd.op + " (node '" +
                                nd.name + "'), which lies between the xs and ys"));
    for (auto e : nd.inputs)
      ctx.inputs.emplace_back(&g, e);
    auto node_scope = g.name_scope(nd.name + "_grad");
    auto in_grads = (*fn)(ctx);
    for (size_t i = 0; i < nd.inputs.size() && i < in_grads.size(); ++i) {
      auto e = nd.inputs[i];
      if (!in_grads[i].valid() || !from_x[size_t(e.node)])
        continue;
      if (!is_float(g.at(e.node).output_types[size_t(e.index)]))
        continue;
      pending[e].push_back(in_grads[i]);
    }
  }

  std::vector<output> result;
  for (auto& x : xs) {
    auto done = finished.find(x.ep());
    output t = done != finished.end() ? done->second : total(x.ep());
    if (!t.valid() && options.unconnected_zeros)
      t = zeros_like(x);
    result.push_back(t);
  }
  return result;
}

} // namespace runnel
