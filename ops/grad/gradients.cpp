#include "runnel/ops/grad/gradients.hpp"

#include <algorithm>
#include <map>

#include "runnel/ops/grad/families.hpp"
#include "runnel/ops/grad/gradients_internal.hpp"

namespace runnel {

output gradient_context::grad(int i) const {
  if (grads[size_t(i)].valid())
    return grads[size_t(i)];
  return zeros_like(out(i));
}

void gradient_registry::add(const std::string& op, gradient_function fn) {
  fns_[op] = std::move(fn);
}
void gradient_registry::add_sparse(const std::string& op, sparse_gradient_function fn) {
  sparse_fns_[op] = std::move(fn);
}
const sparse_gradient_function* gradient_registry::find_sparse(const std::string& op) const {
  auto it = sparse_fns_.find(op);
  return it == sparse_fns_.end() ? nullptr : &it->second;
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

std::vector<std::string> gradient_registry::differentiable_ops() const {
  std::vector<std::string> ops;
  for (auto& [op, fn] : fns_)
    ops.push_back(op);
  for (auto& [op, fn] : sparse_fns_)
    if (!fns_.contains(op))
      ops.push_back(op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

std::vector<std::string> gradient_registry::non_differentiable_ops() const {
  std::vector<std::string> ops;
  for (auto& [op, none] : none_)
    ops.push_back(op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

// Every family of ops/grad/, from the list the build generates out of the RUNNEL_GRADIENT_FAMILY
// lines (cmake/ops_families.cmake): a new family file is found by itself.
#define RUNNEL_FAMILY(family, fn) void register_##fn##_gradients(gradient_registry& reg);
#include "runnel/ops/grad/gradient_families.inc"
#undef RUNNEL_FAMILY

std::map<std::string, std::string> builtin_gradient_families() {
  std::map<std::string, std::string> out;
  auto record = [&](const char* family, void (*add)(gradient_registry&)) {
    gradient_registry one;
    add(one);
    for (auto& op : one.differentiable_ops())
      out[op] = family;
    for (auto& op : one.non_differentiable_ops())
      out[op] = family;
  };
#define RUNNEL_FAMILY(family, fn) record(#family, register_##fn##_gradients);
#include "runnel/ops/grad/gradient_families.inc"
#undef RUNNEL_FAMILY
  return out;
}

const gradient_registry& builtin_gradients() {
  static const gradient_registry* reg = [] {
    auto* r = new gradient_registry;
#define RUNNEL_FAMILY(family, fn) register_##fn##_gradients(*r);
#include "runnel/ops/grad/gradient_families.inc"
#undef RUNNEL_FAMILY
    return r;
  }();
  return *reg;
}

attr_map same_attrs(const node& n, std::initializer_list<const char*> keys) {
  attr_map a;
  for (auto k : keys)
    a[k] = n.attrs.at(k);
  return a;
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


output backprop::total(endpoint e) {
  if (auto s = pending_slices.find(e); s != pending_slices.end()) {
    for (auto& slices : s->second)
      pending[e].push_back(gradient_value(slices).to_dense());
    pending_slices.erase(s);
  }
  auto it = pending.find(e);
  if (it == pending.end() || it->second.empty())
    return {};
  auto& list = it->second;
  if (list.size() > 1)
    list = {add_n(list, "AddN")};
  return list[0];
}

bool backprop::only_slices(endpoint e) const {
  auto s = pending_slices.find(e);
  auto d = pending.find(e);
  return s != pending_slices.end() && !s->second.empty() &&
         (d == pending.end() || d->second.empty());
}

gradient_value backprop::result(endpoint e) {
  if (auto done = finished.find(e); done != finished.end())
    return done->second;
  if (auto done = finished_slices.find(e); done != finished_slices.end())
    return done->second;
  if (only_slices(e))
    return concat_slices(pending_slices.at(e));
  return total(e);
}

/// The loop an Exit leaves (the Exit lives in the loop's enclosing context; its input, the
/// Switch, in the loop), or null.
static const while_context* loop_of_exit(const graph& g, const node& nd) {
  if (nd.op != "Exit" || nd.inputs.empty())
    return nullptr;
  return dynamic_cast<const while_context*>(g.context(g.at(nd.inputs[0].node).context));
}

std::map<int, const while_context*> backprop::loop_triggers(const while_context* scope) const {
  // A loop's Exits are made before its body, and a node outside the loop made while the body
  // was built (a variable an RNN cell makes when first called in a loop) lies between them:
  // differentiated at its Exits, the loop would hand that node a gradient the walk had passed.
  // So each loop of this scope is differentiated at its last node on the path instead (not at
  // nodes an earlier gradients() call added to it, which come after the loss).
  std::map<const while_context*, int> last;
  for (int v = 0; v < n_; ++v) {
    const node& nd = g_.at(v);
    if (auto* loop = loop_of_exit(g_, nd);
        loop && on_path(v) && enclosing_loop(g_.context(nd.context)) == scope)
      last[loop] = std::max(last[loop], v);
  }
  if (!last.empty())
    for (int v = 0; v < n_; ++v)
      for (auto* c = g_.context(g_.at(v).context); c && on_path(v); c = c->outer)
        if (auto it = last.find(dynamic_cast<const while_context*>(c)); it != last.end())
          it->second = std::max(it->second, v);
  std::map<int, const while_context*> at;
  for (auto& [loop, v] : last)
    at[v] = loop;
  return at;
}

void backprop::walk(const while_context* scope) {
  // Node ids are a topological order (back edges aside): walking them backwards visits
  // consumers first.
  auto triggers = loop_triggers(scope);
  for (int v = n_ - 1; v >= 0; --v) {
    if (auto it = triggers.find(v); it != triggers.end())
      if (done_loops_.insert(it->second).second)
        differentiate_loop(const_cast<while_context&>(*it->second));
    if (!on_path(v))
      continue;
    const node& nd = g_.at(v);
    const flow_context* c = g_.context(nd.context);
    if (auto* loop = loop_of_exit(g_, nd); loop && enclosing_loop(c) == scope)
      continue; // differentiated at its last node, above
    if (enclosing_loop(c) != scope)
      continue;
    if (scope) {
      // The loop's own plumbing: differentiate_loop routes gradients through it.
      if (nd.op == "Enter" || nd.op == "NextIteration" || nd.op == "LoopCond")
        continue;
      bool plumbing = false;
      for (auto& var : scope->vars)
        plumbing |= v == var.merge || v == var.switch_op;
      if (plumbing)
        continue;
    }
    process(v);
  }
}

void backprop::process(int v) {
  const node& nd = g_.at(v);
  const flow_context* fctx = g_.context(nd.context);
  auto* branch = dynamic_cast<const cond_context*>(fctx);
  if (nd.inputs.empty())
    return; // nothing to pass on; gradients() reads what arrived here
  if (nd.op == "Identity" && pass_slices(v))
    return;
  // A cond's Switch (an import into a branch) has its gradient in the branch; the rest of a
  // node's gradient lives where the node does.
  std::vector<output> grads;
  bool any = false;
  {
    auto in_grad = g_.enter_context(grad_context(fctx));
    for (int o = 0; o < nd.num_outputs(); ++o) {
      output t = total({v, o});
      if (t.valid()) {
        any = true;
        finished[{v, o}] = t;
      }
      grads.push_back(t);
    }
  }
  if (!any)
    return;
  auto& reg = builtin_gradients();
  bool float_in = std::any_of(nd.inputs.begin(), nd.inputs.end(), [&](endpoint e) {
    return is_floating(g_.at(e.node).output_types[size_t(e.index)]);
  });
  if (nd.op == "StopGradient" || !float_in || reg.is_non_differentiable(nd.op))
    return;
  auto node_scope = g_.name_scope(nd.name + "_grad");
  if (nd.op == "Merge") {
    cond_merge_grad(nd, grads);
    return;
  }
  if (nd.op == "Switch" && branch) {
    cond_switch_grad(nd, *branch, grads[size_t(branch->branch())]);
    return;
  }
  if (is_control_flow_op(nd.op))
    throw error(unimplemented("gradients: node '" + nd.name + "' (op " + nd.op +
                              ") is control flow that was not built by cond or while_loop; "
                              "only those can be differentiated"));
  auto* sparse_fn = reg.find_sparse(nd.op);
  auto* fn = reg.find(nd.op);
  if (!fn && !sparse_fn)
    throw error(unimplemented("gradients: no gradient is defined for op " + nd.op + " (node '" +
                              nd.name + "'), which lies between the xs and ys"));
  gradient_context ctx{g_, nd, {}, {}, grads};
  for (auto e : nd.inputs)
    ctx.inputs.emplace_back(&g_, e);
  for (int o = 0; o < nd.num_outputs(); ++o)
    ctx.outputs.emplace_back(&g_, endpoint{v, o});
  if (!loops_.empty())
    ctx.remap = [this](output x) { return forward_value(x); };
  ctx.source = source_;
  std::vector<gradient_value> in_grads;
  {
    auto in_grad = g_.enter_context(grad_context(fctx));
    if (sparse_fn) {
      in_grads = (*sparse_fn)(ctx);
    } else {
      auto dense = (*fn)(ctx);
      in_grads.assign(dense.begin(), dense.end());
    }
  }
  for (size_t i = 0; i < nd.inputs.size() && i < in_grads.size(); ++i) {
    auto e = nd.inputs[i];
    if (!in_grads[i].valid() || !from_x_[size_t(e.node)])
      continue;
    if (!is_floating(g_.at(e.node).output_types[size_t(e.index)]))
      continue;
    if (in_grads[i].is_sparse())
      pending_slices[e].push_back(in_grads[i].slices());
    else
      pending[e].push_back(in_grads[i].to_dense());
  }
}

bool backprop::pass_slices(int v) {
  // Slices reaching an Identity (a variable's read) pass through it unchanged, as long as no
  // dense gradient arrived too.
  endpoint out{v, 0};
  if (!only_slices(out))
    return false;
  indexed_slices combined;
  {
    auto in_grad = g_.enter_context(grad_context(g_.context(g_.at(v).context)));
    combined = concat_slices(pending_slices.at(out));
  }
  pending_slices.erase(out);
  finished_slices[out] = combined;
  endpoint in = g_.at(v).inputs[0];
  if (from_x_[size_t(in.node)])
    pending_slices[in].push_back(combined);
  return true;
}

const while_context* enclosing_loop(const flow_context* c) {
  for (; c; c = c->outer)
    if (auto* w = dynamic_cast<const while_context*>(c))
      return w;
  return nullptr;
}

std::vector<output> gradients(const std::vector<output>& ys, const std::vector<output>& xs,
                              const std::vector<output>& grad_ys, gradient_options options) {
  auto values = gradient_values(ys, xs, grad_ys, options);
  std::vector<output> out;
  if (!values.empty()) {
    auto scope = ys[0].owner().name_scope("gradients");
    for (auto& v : values)
      out.push_back(v.valid() ? v.to_dense() : output());
  }
  return out;
}

std::vector<gradient_value> gradient_values(const std::vector<output>& ys,
                                            const std::vector<output>& xs,
                                            const std::vector<output>& grad_ys,
                                            gradient_options options) {
  if (ys.empty())
    throw error(invalid_argument("gradients: ys is empty"));
  graph& g = ys[0].owner();
  if (!grad_ys.empty() && grad_ys.size() != ys.size())
    throw error(invalid_argument("gradients: " + std::to_string(grad_ys.size()) + " grad_ys for " +
                                 std::to_string(ys.size()) + " ys"));
  for (auto* list : {&ys, &xs})
    for (auto& t : *list)
      if (auto* loop = enclosing_loop(g.context(t.node().context)))
        throw error(unimplemented("gradients: '" + t.name() + "' is inside " + loop->describe() +
                                  "; differentiate the loop's outputs with respect to tensors "
                                  "outside it"));
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
    // Nothing flows back through a StopGradient: what lies only behind it (a loop whose
    // outputs were stopped, say) gets no gradient nodes, and an x only there gets none.
    if (g.at(v).op == "StopGradient")
      continue;
    for (auto e : g.at(v).inputs)
      stack.push_back(e.node);
  }

  auto scope = g.name_scope("gradients");
  auto no_deps = g.control_dependencies({});
  backprop bp(g, n, std::move(from_x), std::move(to_y), g.reserve_name("gradients_source"));
  for (size_t i = 0; i < ys.size(); ++i)
    bp.pending[ys[i].ep()].push_back(grad_ys.empty() ? ones_like(ys[i], "grad_ys") : grad_ys[i]);
  bp.walk(nullptr);

  std::vector<gradient_value> result;
  for (auto& x : xs) {
    gradient_value t = bp.result(x.ep());
    if (!t.valid() && options.unconnected_zeros)
      t = zeros_like(x);
    result.push_back(t);
  }
  return result;
}

output gradient_value::to_dense() const {
  if (!sparse_)
    return dense_;
  graph& g = slices_.values.owner();
  output rows;
  auto& shape_node = slices_.dense_shape.node();
  if (shape_node.op == "Const") { // known while building: keeps the dense shape static
    auto dims = to_int64_vector(get_attr<tensor>(shape_node.attrs, "value")).value();
    rows = constant(g, tensor::scalar<int64_t>(dims.at(0)), "rows");
  } else {
    rows = reshape(slice(slices_.dense_shape, std::vector<int64_t>{0}, std::vector<int64_t>{1}),
                   std::vector<int64_t>{}, "rows");
  }
  return unsorted_segment_sum(slices_.values, slices_.indices, rows, "to_dense");
}

gradient_value gradient_value::with_values(output values) const {
  if (!sparse_)
    return gradient_value(values);
  return indexed_slices{values, slices_.indices, slices_.dense_shape};
}

indexed_slices concat_slices(const std::vector<indexed_slices>& parts) {
  if (parts.empty())
    throw error(invalid_argument("concat_slices: no slices"));
  if (parts.size() == 1)
    return parts[0];
  std::vector<output> values, indices;
  bool mixed = false;
  for (auto& p : parts)
    mixed |= p.indices.type() != parts[0].indices.type();
  for (auto& p : parts) {
    values.push_back(p.values);
    indices.push_back(mixed ? cast(p.indices, dtype::i64) : p.indices);
  }
  return {concat(values, 0, "slice_values"), concat(indices, 0, "slice_indices"),
          parts[0].dense_shape};
}

output global_norm(const std::vector<gradient_value>& ts, std::string_view name) {
  std::vector<output> squares;
  for (auto& t : ts)
    if (t.valid())
      squares.push_back(sum(square(t.values())));
  if (squares.empty())
    throw error(invalid_argument("global_norm: no valid tensors"));
  graph& g = squares[0].owner();
  auto scope = g.name_scope(name.empty() ? "global_norm" : name);
  return sqrt(squares.size() == 1 ? squares[0] : add_n(squares), "global_norm");
}

std::pair<std::vector<gradient_value>, output>
clip_by_global_norm(const std::vector<gradient_value>& ts, double clip_norm,
                    std::string_view name) {
  if (!(clip_norm > 0))
    throw error(invalid_argument("clip_by_global_norm: clip_norm must be positive, got " +
                                 std::to_string(clip_norm)));
  auto norm = global_norm(ts);
  graph& g = norm.owner();
  auto scope = g.name_scope(name.empty() ? "clip_by_global_norm" : name);
  auto clip = filled(g, norm.type(), shape{}, clip_norm, "clip_norm");
  auto scale = clip / maximum(norm, clip);
  std::vector<gradient_value> out;
  for (auto& t : ts) {
    if (!t.valid()) {
      out.push_back(t);
      continue;
    }
    dtype dt = t.values().type();
    out.push_back(t.with_values(t.values() * (dt == scale.type() ? scale : cast(scale, dt))));
  }
  return {out, norm};
}

} // namespace runnel
