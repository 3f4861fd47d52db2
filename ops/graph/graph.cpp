#include "runnel/ops/graph/graph.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace runnel {

const node& output::node() const {
  return g_->at(e_.node);
}
std::string output::name() const {
  return g_->endpoint_name(e_);
}
dtype output::type() const {
  return node().output_types[size_t(e_.index)];
}
const shape& output::shape() const {
  return node().output_shapes[size_t(e_.index)];
}
const node& operation::node() const {
  return g_->at(node_);
}
const std::string& operation::name() const {
  return node().name;
}

node_def node::to_def(const graph& g) const {
  node_def d{name, op, {}, device, attrs};
  for (auto e : inputs)
    d.inputs.push_back(g.endpoint_name(e));
  for (int c : control_inputs)
    d.inputs.push_back("^" + g.at(c).name);
  if (!colocation.empty()) {
    std::vector<std::string> cls;
    for (auto& c : colocation)
      cls.push_back("loc:@" + c);
    d.attrs["_class"] = cls;
  }
  return d;
}

std::string variable_resource_name(const node& n) {
  auto shared = get_attr<std::string>(n.attrs, "shared_name");
  auto container = get_attr<std::string>(n.attrs, "container");
  std::string name = shared.empty() ? n.name : shared;
  return container.empty() ? name : container + "/" + name;
}

std::optional<int> graph::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end())
    return std::nullopt;
  return it->second;
}

result<endpoint> graph::find_endpoint(std::string_view spec) const {
  std::string_view node_name = spec;
  int index = 0;
  if (auto colon = spec.rfind(':'); colon != std::string_view::npos) {
    auto digits = spec.substr(colon + 1);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc() || p != digits.data() + digits.size() || index < 0)
      return invalid_argument("malformed tensor name '" + std::string(spec) +
                              "': expected 'node' or 'node:index'");
    node_name = spec.substr(0, colon);
  }
  auto id = find(node_name);
  if (!id)
    return not_found("no node named '" + std::string(node_name) + "' in the graph");
  if (index >= at(*id).num_outputs())
    return out_of_range("node '" + std::string(node_name) + "' (op " + at(*id).op + ") has " +
                        std::to_string(at(*id).num_outputs()) + " outputs; '" + std::string(spec) +
                        "' asks for output " + std::to_string(index));
  return endpoint{*id, index};
}

std::string graph::endpoint_name(endpoint e) const {
  auto& n = at(e.node).name;
  return e.index == 0 ? n : n + ":" + std::to_string(e.index);
}

std::string graph::unique_name(std::string_view base) {
  std::string prefix;
  for (auto& s : scopes_)
    prefix += s + "/";
  std::string name = prefix + std::string(base);
  if (!by_name_.count(name) && !name_counts_.count(name)) {
    name_counts_[name] = 0;
    return name;
  }
  int& count = name_counts_[name];
  std::string candidate;
  do {
    candidate = name + "_" + std::to_string(++count);
  } while (by_name_.count(candidate));
  return candidate;
}

result<int> graph::add_node(const node_def& def) {
  auto context = "node '" + def.name + "' (op " + def.op + ")";
  if (def.name.empty())
    return invalid_argument("a node of op " + def.op + " has an empty name");
  if (by_name_.count(def.name))
    return already_exists(context + ": a node with this name already exists");
  node n;
  n.name = def.name;
  n.op = def.op;
  n.device = def.device;
  n.attrs = def.attrs;
  std::vector<std::pair<size_t, std::string>> forward;
  for (auto& in : def.inputs) {
    if (!in.empty() && in[0] == '^') {
      auto id = find(std::string_view(in).substr(1));
      if (!id)
        return invalid_argument(context + ": control input '" + in +
                                "' refers to a node that does not exist");
      n.control_inputs.push_back(*id);
    } else {
      auto e = find_endpoint(in);
      if (!e && def.op == "Merge") { // a loop's back edge from a NextIteration added later
        forward.emplace_back(n.inputs.size(), in);
        n.inputs.push_back({});
        continue;
      }
      if (!e)
        return invalid_argument(context + ": input '" + in + "': " + e.error().message());
      n.inputs.push_back(*e);
    }
  }
  if (!forward.empty()) {
    // Until the NextIteration exists, the Merge's other input stands in for it.
    auto known = std::find_if(n.inputs.begin(), n.inputs.end(), [](endpoint e) { return e.node >= 0; });
    if (known == n.inputs.end())
      return invalid_argument(context + ": input '" + forward[0].second +
                              "' refers to a node that does not exist");
    for (auto& [slot, spec] : forward)
      n.inputs[slot] = *known;
  }
  if (auto it = n.attrs.find("_class"); it != n.attrs.end()) {
    if (auto* v = std::get_if<std::vector<std::string>>(&it->second))
      for (auto& c : *v)
        n.colocation.push_back(c.rfind("loc:@", 0) == 0 ? c.substr(5) : c);
    n.attrs.erase(it);
  }
  RUNNEL_ASSIGN_OR_RETURN(int id, finish_node(std::move(n)));
  for (auto& [slot, spec] : forward)
    pending_back_edges_.push_back({id, int(slot), spec});
  // Back edges waiting for this node.
  for (auto it = pending_back_edges_.begin(); it != pending_back_edges_.end();) {
    auto e = find_endpoint(it->spec);
    if (!e) {
      ++it;
      continue;
    }
    RUNNEL_RETURN_IF_ERROR(set_back_edge(it->merge, it->slot, *e));
    it = pending_back_edges_.erase(it);
  }
  return id;
}

status graph::check_complete() const {
  if (pending_back_edges_.empty())
    return {};
  auto& p = pending_back_edges_.front();
  return invalid_argument("node '" + at(p.merge).name + "' (op Merge): input '" + p.spec +
                          "' refers to a node that does not exist");
}

result<int> graph::add_op(std::string_view op, std::string_view name_hint,
                          const std::vector<endpoint>& inputs, attr_map attrs) {
  node n;
  n.name = unique_name(name_hint.empty() ? op : name_hint);
  n.op = std::string(op);
  n.inputs = inputs;
  n.attrs = std::move(attrs);
  n.device = device_;
  n.control_inputs = control_deps_;
  n.colocation = colocation_;
  if (device_fn_ && colocation_.empty())
    n.device = device_fn_(n);
  for (auto e : inputs)
    if (e.node < 0 || e.node >= num_nodes())
      return invalid_argument("node '" + n.name + "' (op " + n.op +
                              "): an input refers to a node of another graph or no node");
  if (!importing_) {
    RUNNEL_RETURN_IF_ERROR(import_inputs(n));
  }
  if (context_ && !importing_) {
    n.context = context_->id;
    // A node with no inputs would run once per step; made to wait on the context's pivot, it
    // runs in each branch taken or iteration.
    if (n.inputs.empty() && n.control_inputs.empty() && context_->pivot >= 0)
      n.control_inputs.push_back(context_->pivot);
  } else if (context_) {
    n.context = context_->id;
  }
  return finish_node(std::move(n));
}

status graph::add_control_edge(int from, int to) {
  if (from < 0 || to < 0 || from >= num_nodes() || to >= num_nodes())
    return invalid_argument("control edge between unknown nodes");
  // A cycle exists if `from` is reachable from `to`.
  std::vector<char> seen(static_cast<size_t>(num_nodes()), 0);
  auto consumers = data_consumers();
  std::vector<std::vector<int>> control_out(static_cast<size_t>(num_nodes()));
  for (auto& n : nodes_)
    for (int c : n.control_inputs)
      control_out[size_t(c)].push_back(n.id);
  std::vector<int> stack{to};
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (v == from)
      return invalid_argument("a control edge from '" + at(from).name + "' to '" + at(to).name +
                              "' would create a cycle");
    if (seen[size_t(v)]++)
      continue;
    for (auto [c, slot] : consumers[size_t(v)])
      stack.push_back(c);
    for (int c : control_out[size_t(v)])
      stack.push_back(c);
  }
  auto changing = lock_for_changes();
  auto& ci = nodes_[size_t(to)].control_inputs;
  if (std::find(ci.begin(), ci.end(), from) == ci.end())
    ci.push_back(from);
  return {};
}

graph::scope_guard graph::name_scope(std::string_view name) {
  if (name.empty()) { // back to the root, as TensorFlow's name_scope("") / None
    auto saved = std::move(scopes_);
    scopes_.clear();
    return scope_guard([this, saved = std::move(saved)] { scopes_ = saved; });
  }
  scopes_.emplace_back(name);
  return scope_guard([this] { scopes_.pop_back(); });
}

graph::scope_guard graph::device(std::string_view device) {
  auto previous = device_;
  device_ = std::string(device);
  return scope_guard([this, previous] { device_ = previous; });
}

graph::scope_guard graph::control_dependencies(std::vector<operation> ops) {
  auto previous = control_deps_;
  if (ops.empty())
    control_deps_.clear(); // an empty list clears the enclosing dependencies, as in TensorFlow
  for (auto& op : ops)
    if (std::find(control_deps_.begin(), control_deps_.end(), op.node_id()) == control_deps_.end())
      control_deps_.push_back(op.node_id());
  return scope_guard([this, previous] { control_deps_ = previous; });
}

graph::scope_guard graph::device(std::function<std::string(const node&)> fn) {
  auto previous = device_fn_;
  device_fn_ = std::move(fn);
  return scope_guard([this, previous] { device_fn_ = previous; });
}

graph::scope_guard graph::colocate_with(operation op) {
  // As in TensorFlow, colocation overrides the enclosing device scopes: the node goes where
  // `op` goes (an optimizer's update built under a worker's scope still lands on the ps).
  auto previous = colocation_;
  auto previous_device = device_;
  colocation_ = {op.name()};
  device_.clear();
  return scope_guard([this, previous, previous_device] {
    colocation_ = previous;
    device_ = previous_device;
  });
}

const std::vector<int>& graph::collection(const std::string& name) const {
  static const std::vector<int> empty;
  auto it = collections_.find(name);
  return it == collections_.end() ? empty : it->second;
}

std::vector<std::vector<std::pair<int, int>>> graph::data_consumers() const {
  std::vector<std::vector<std::pair<int, int>>> out(nodes_.size());
  for (auto& n : nodes_)
    for (size_t s = 0; s < n.inputs.size(); ++s)
      out[size_t(n.inputs[s].node)].emplace_back(n.id, int(s));
  return out;
}

std::string graph::to_text() const {
  std::ostringstream os;
  for (auto& n : nodes_) {
    os << n.name << " = " << n.op << "(";
    bool first = true;
    for (auto e : n.inputs) {
      os << (first ? "" : ", ") << endpoint_name(e);
      first = false;
    }
    for (int c : n.control_inputs) {
      os << (first ? "" : ", ") << "^" << at(c).name;
      first = false;
    }
    os << ")";
    if (!n.attrs.empty()) {
      os << " {";
      bool f = true;
      for (auto& [k, v] : n.attrs) {
        os << (f ? "" : ", ") << k << "=" << attr_to_string(v);
        f = false;
      }
      os << "}";
    }
    os << " ->";
    for (size_t i = 0; i < n.output_types.size(); ++i)
      os << (i ? ", " : " ") << name(n.output_types[i]) << n.output_shapes[i].to_string();
    if (n.output_types.empty())
      os << " ()";
    if (!n.device.empty())
      os << " @" << n.device;
    if (!n.colocation.empty()) {
      os << " colocate_with:";
      for (auto& c : n.colocation)
        os << " " << c;
    }
    os << "\n";
  }
  return os.str();
}

} // namespace runnel
