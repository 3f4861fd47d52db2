// Adding nodes: checking a node against its op (inputs, attributes, shape inference), and the
// control-flow frames its inputs come from (graph.cpp has the rest of the graph).
#include "runnel/ops/graph/graph.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace runnel {

namespace {
bool encloses(const flow_context* outer, const flow_context* inner) {
  for (auto* c = inner; c; c = c->outer)
    if (c == outer)
      return true;
  return outer == nullptr;
}
std::string where(const flow_context* c) {
  return c ? c->describe() : "the top level of the graph";
}

/// Whether input `k` of a node of `def` is a ref argument (mapped while the arguments before it
/// are single tensors; false past the first list).
bool is_ref_input(const op_def* def, size_t k) {
  if (!def)
    return false;
  for (size_t i = 0; i < def->inputs.size() && i <= k; ++i) {
    auto& arg = def->inputs[i];
    if (!arg.number_attr.empty() || !arg.type_list_attr.empty())
      return false;
    if (i == k)
      return arg.is_ref;
  }
  return false;
}

/// Whether every context from `inner` out to (not including) `outer` keeps refs by gating.
bool refs_gated(const flow_context* inner, const flow_context* outer) {
  for (auto* c = inner; c != outer; c = c->outer)
    if (!c->gates_refs())
      return false;
  return true;
}
} // namespace

status graph::import_inputs(node& n) {
  if (contexts_.empty())
    return {};
  const op_def* def = ops_->find(n.op);
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    auto& e = n.inputs[k];
    const flow_context* from = context(at(e.node).context);
    if (from == context_)
      continue;
    if (context_ && context_->pivot >= 0 && is_ref_input(def, k) && encloses(from, context_) &&
        refs_gated(context_, from)) {
      // An Assign in a branch updates the variable itself, and only when the branch runs.
      if (std::find(n.control_inputs.begin(), n.control_inputs.end(), context_->pivot) ==
          n.control_inputs.end())
        n.control_inputs.push_back(context_->pivot);
      continue;
    }
    if (!encloses(from, context_))
      return invalid_argument(
          "node '" + n.name + "' (op " + n.op + ") in " + where(context_) + " uses '" +
          endpoint_name(e) + "', which is computed in " + where(from) +
          ": a tensor made inside a while loop or a cond branch can be used only there, or "
          "outside through the loop's or cond's outputs (TensorFlow: \"has inputs from "
          "different frames\")");
    // Import through every context between `from` and here, outermost first.
    std::vector<flow_context*> chain;
    for (auto* c = context_; c != from; c = c->outer)
      chain.push_back(c);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      flow_context* c = *it;
      auto saved_context = context_;
      auto saved_deps = std::move(control_deps_);
      control_deps_.clear();
      context_ = c->outer;
      importing_ = true;
      auto imported = c->import(*this, e);
      importing_ = false;
      context_ = saved_context;
      control_deps_ = std::move(saved_deps);
      if (!imported)
        return imported.error().with_context("node '" + n.name + "'");
      e = *imported;
    }
  }
  for (int c : n.control_inputs) {
    const flow_context* from = context(at(c).context);
    if (from != context_)
      return invalid_argument("node '" + n.name + "' (op " + n.op + ") in " + where(context_) +
                              " has a control input from '" + at(c).name + "' in " + where(from) +
                              ": control dependencies cannot cross into or out of a while "
                              "loop or cond branch (make the dependency outside it)");
  }
  return {};
}

flow_context& graph::add_flow_context(std::unique_ptr<flow_context> ctx) {
  ctx->id = int(contexts_.size());
  contexts_.push_back(std::move(ctx));
  return *contexts_.back();
}

graph::scope_guard graph::plumbing() {
  bool previous = importing_;
  importing_ = true;
  return scope_guard([this, previous] { importing_ = previous; });
}

graph::scope_guard graph::enter_context(flow_context* ctx) {
  auto previous = context_;
  auto previous_deps = control_deps_;
  context_ = ctx;
  control_deps_.clear(); // dependencies from outside cannot reach into the context
  return scope_guard([this, previous, previous_deps] {
    context_ = previous;
    control_deps_ = previous_deps;
  });
}

status graph::set_back_edge(int merge, int slot, endpoint next) {
  if (merge < 0 || merge >= num_nodes() || next.node < 0 || next.node >= num_nodes())
    return invalid_argument("set_back_edge: no such node");
  node& m = nodes_[size_t(merge)];
  const node& src = at(next.node);
  if (m.op != "Merge" || src.op != "NextIteration")
    return invalid_argument("a back edge must go from a NextIteration to a Merge, not from '" +
                            src.name + "' (op " + src.op + ") to '" + m.name + "' (op " + m.op +
                            ")");
  if (slot < 0 || size_t(slot) >= m.inputs.size())
    return invalid_argument("Merge '" + m.name + "' has no input " + std::to_string(slot));
  if (src.output_types[size_t(next.index)] != m.output_types[0])
    return invalid_argument("NextIteration '" + src.name + "' gives " +
                            std::string(name(src.output_types[size_t(next.index)])) +
                            " but Merge '" + m.name + "' carries " +
                            std::string(name(m.output_types[0])));
  auto changing = lock_for_changes();
  m.inputs[size_t(slot)] = next;
  return {};
}

std::vector<output> graph::build(std::string_view op, std::string_view name_hint,
                                 const std::vector<endpoint>& inputs, attr_map attrs) {
  int id = add_op(op, name_hint, inputs, std::move(attrs)).value();
  std::vector<output> outs;
  for (int i = 0; i < at(id).num_outputs(); ++i)
    outs.emplace_back(this, endpoint{id, i});
  return outs;
}

namespace {

/// How many inputs argument `arg` (the a-th) takes, from its list or number attribute, inferring
/// the attribute from the inputs left when the node does not give it (later arguments are single
/// tensors). `k` is the first input it takes.
result<int64_t> argument_count(const graph& g, node& n, const op_def& def, size_t a, size_t k,
                               const std::vector<dtype>*& list_types) {
  auto& arg = def.inputs[a];
  size_t after = def.inputs.size() - a - 1;
  list_types = nullptr;
  if (!arg.type_list_attr.empty()) {
    auto it = n.attrs.find(arg.type_list_attr);
    if (it == n.attrs.end()) {
      std::vector<dtype> types;
      for (size_t j = k; j + after < n.inputs.size(); ++j)
        types.push_back(g.at(n.inputs[j].node).output_types[size_t(n.inputs[j].index)]);
      it = n.attrs.emplace(arg.type_list_attr, types).first;
    }
    list_types = std::get_if<std::vector<dtype>>(&it->second);
    if (!list_types)
      return invalid_argument("attribute '" + arg.type_list_attr + "' must be a list of types");
    return int64_t(list_types->size());
  }
  if (arg.number_attr.empty())
    return int64_t(1);
  auto it = n.attrs.find(arg.number_attr);
  if (it == n.attrs.end()) {
    int64_t count = std::max<int64_t>(0, int64_t(n.inputs.size()) - int64_t(k) - int64_t(after));
    n.attrs[arg.number_attr] = count;
    return count;
  }
  if (auto* c = std::get_if<int64_t>(&it->second))
    return *c;
  return invalid_argument("attribute '" + arg.number_attr + "' must be an int");
}

/// Input k, the j-th of argument `arg`: a variable where the argument is a ref, of the list's,
/// the fixed or the type attribute's dtype (inferring the attribute from the first such input).
status check_input(const graph& g, node& n, const arg_def& arg, size_t k, int64_t j,
                   const std::vector<dtype>* list_types) {
  auto e = n.inputs[k];
  auto& producer = g.at(e.node);
  dtype t = producer.output_types[size_t(e.index)];
  // The messages' start, built only when one is returned (this runs for every input added).
  auto input = [&] { return "input " + std::to_string(k) + " ('" + arg.name; };
  if (arg.is_ref && !producer.def->stateful)
    return invalid_argument(input() + "') must be a variable, but comes from '" + producer.name +
                            "' (op " + producer.op + ")");
  if (list_types) {
    dtype want = (*list_types)[size_t(j)];
    if (t != want)
      return invalid_argument(input() + "[" + std::to_string(j) + "]') must be " +
                              std::string(name(want)) + " (attribute " + arg.type_list_attr +
                              "), got " + std::string(name(t)) + " from '" + g.endpoint_name(e) +
                              "'");
    return {};
  }
  if (arg.fixed != dtype::invalid) {
    if (t != arg.fixed)
      return invalid_argument(input() + "') must be " + std::string(name(arg.fixed)) + ", got " +
                              std::string(name(t)) + " from '" + g.endpoint_name(e) + "'");
    return {};
  }
  auto it = n.attrs.find(arg.type_attr);
  if (it == n.attrs.end()) {
    n.attrs[arg.type_attr] = t;
  } else if (auto* want = std::get_if<dtype>(&it->second); want && *want != t) {
    return invalid_argument(input() + "') has dtype " + std::string(name(t)) + " from '" +
                            g.endpoint_name(e) + "', but " + arg.type_attr + " is " +
                            std::string(name(*want)) + " (all inputs of type " + arg.type_attr +
                            " must agree)");
  }
  return {};
}

/// Matches the inputs to the argument definitions, inferring type and number attributes.
status match_inputs(const graph& g, node& n, const op_def& def) {
  size_t k = 0;
  for (size_t a = 0; a < def.inputs.size(); ++a) {
    const std::vector<dtype>* list_types = nullptr;
    RUNNEL_ASSIGN_OR_RETURN(int64_t count, argument_count(g, n, def, a, k, list_types));
    for (int64_t j = 0; j < count; ++j, ++k) {
      if (k >= n.inputs.size())
        return invalid_argument("expects " +
                                std::string(def.inputs.size() == 1 ? "input " : "inputs ") +
                                "for argument '" + def.inputs[a].name + "' but got only " +
                                std::to_string(n.inputs.size()) + " inputs");
      RUNNEL_RETURN_IF_ERROR(check_input(g, n, def.inputs[a], k, j, list_types));
    }
  }
  if (k != n.inputs.size())
    return invalid_argument("takes " + std::to_string(k) + " inputs, got " +
                            std::to_string(n.inputs.size()));
  return {};
}

/// Defaults, required attributes, attribute types and allowed dtypes.
status check_attrs(node& n, const op_def& def) {
  for (auto& ad : def.attrs) {
    auto it = n.attrs.find(ad.name);
    if (it == n.attrs.end()) {
      if (!ad.default_value)
        return invalid_argument("missing required attribute '" + ad.name + "' (" +
                                to_string(ad.type) + ")");
      it = n.attrs.emplace(ad.name, *ad.default_value).first;
    }
    if (ad.type == attr_type::real && std::holds_alternative<int64_t>(it->second))
      it->second = double(std::get<int64_t>(it->second));
    if (type_of(it->second) != ad.type)
      return invalid_argument("attribute '" + ad.name + "' must be " + to_string(ad.type) +
                              ", got " + to_string(type_of(it->second)));
    if (ad.type == attr_type::type && !ad.allowed.empty()) {
      dtype t = std::get<dtype>(it->second);
      if (std::find(ad.allowed.begin(), ad.allowed.end(), t) == ad.allowed.end()) {
        std::string allowed;
        for (auto a : ad.allowed)
          allowed += (allowed.empty() ? "" : ", ") + std::string(name(a));
        return invalid_argument("attribute '" + ad.name + "' is " + std::string(name(t)) +
                                ", which op " + n.op + " does not support (allowed: " + allowed +
                                ")");
      }
    }
  }
  return {};
}

/// The output dtypes, from the output arguments' attributes.
void set_output_types(node& n, const op_def& def) {
  for (auto& arg : def.outputs) {
    if (!arg.type_list_attr.empty()) {
      for (dtype t : get_attr<std::vector<dtype>>(n.attrs, arg.type_list_attr))
        n.output_types.push_back(t);
      continue;
    }
    int64_t count = arg.number_attr.empty() ? 1 : get_attr<int64_t>(n.attrs, arg.number_attr);
    dtype t = arg.fixed != dtype::invalid ? arg.fixed : get_attr<dtype>(n.attrs, arg.type_attr);
    for (int64_t j = 0; j < count; ++j)
      n.output_types.push_back(t);
  }
}

/// The output shapes, from the op's shape function (constant inputs' values given to it).
status infer_output_shapes(const graph& g, node& n, const op_def& def) {
  std::vector<dtype> in_types;
  std::vector<shape> in_shapes;
  std::vector<const tensor*> in_consts;
  for (auto e : n.inputs) {
    auto& p = g.at(e.node);
    in_types.push_back(p.output_types[size_t(e.index)]);
    in_shapes.push_back(p.output_shapes[size_t(e.index)]);
    in_consts.push_back(p.op == "Const" ? &std::get<tensor>(p.attrs.at("value")) : nullptr);
  }
  inference_context ctx(n.name, def, n.attrs, std::move(in_types), std::move(in_shapes),
                        std::move(in_consts), n.output_types.size());
  if (def.infer_shapes)
    RUNNEL_RETURN_IF_ERROR(def.infer_shapes(ctx));
  n.output_shapes = ctx.output_shapes();
  return {};
}

} // namespace

result<int> graph::finish_node(node n) {
  auto context = "node '" + n.name + "' (op " + n.op + ")";
  auto fail = [&](const status& s) { return s.with_context(context); };
  auto def_r = ops_->lookup(n.op);
  if (!def_r)
    return fail(def_r.error());
  const op_def& def = *def_r.value();
  n.def = &def;
  // Internal attributes ('_' first) the op does not declare stay; unknown public ones fail.
  for (auto& [attr, value] : n.attrs)
    if (!def.find_attr_def(attr) && (attr.empty() || attr[0] != '_'))
      return fail(invalid_argument("unknown attribute '" + attr + "' for op " + n.op));
  if (status s = match_inputs(*this, n, def); !s.ok())
    return fail(s);
  if (status s = check_attrs(n, def); !s.ok())
    return fail(s);
  set_output_types(n, def);
  if (status s = infer_output_shapes(*this, n, def); !s.ok())
    return fail(s);
  for (auto& c : n.colocation)
    if (!find(c))
      return fail(invalid_argument("colocated with '" + c + "', which does not exist"));
  n.id = num_nodes();
  auto changing = lock_for_changes();
  by_name_[n.name] = n.id;
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

} // namespace runnel
