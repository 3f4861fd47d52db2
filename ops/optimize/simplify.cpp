// Two passes that only rewire: pruning of Identity-like nodes, NoOps, redundant Casts and
// Reshapes; and common subexpression elimination.
#include <algorithm>
#include <functional>
#include <unordered_map>

#include "runnel/ops/optimize/rewrite.hpp"

namespace runnel::optimize {
namespace {

/// Whether `v` passes its only input through unchanged (a Cast to its own type, a Reshape to
/// the shape its input already has, fully known).
bool is_pass_through(const rgraph& r, int v) {
  const rnode& n = r.nodes[size_t(v)];
  if (n.op == "Identity" || n.op == "StopGradient" || n.op == "PreventGradient" ||
      n.op == "Snapshot")
    return n.inputs.size() == 1;
  if (n.inputs.empty())
    return false;
  endpoint in = n.inputs[0];
  const rnode& p = r.nodes[size_t(in.node)];
  if (n.op == "Cast") {
    auto src = n.attrs.find("SrcT"), dst = n.attrs.find("DstT");
    return src != n.attrs.end() && dst != n.attrs.end() &&
           attr_to_string(src->second) == attr_to_string(dst->second);
  }
  if (n.op == "Reshape" || n.op == "Squeeze" || n.op == "ExpandDims") {
    const shape& from = p.shapes[size_t(in.index)];
    return from.is_fully_defined() && n.shapes[0].is_fully_defined() && from == n.shapes[0];
  }
  return false;
}

} // namespace

status prune_identities(rgraph& r) {
  auto data = r.consumers();
  auto control = r.control_consumers();
  int identities = 0, noops = 0;
  for (int v : r.topo_order()) {
    rnode& n = r.nodes[size_t(v)];
    if (r.is_kept(v) || !n.control_inputs.empty() || !is_pass_through(r, v))
      continue;
    endpoint in = n.inputs[0];
    const rnode& p = r.nodes[size_t(in.node)];
    // An Identity of a variable reads it (a snapshot); one onto another device is a copy. One of
    // a Switch's output is a conditional branch's pivot (what waits on it runs in that branch
    // only; waiting on the Switch runs in both), and one of an Enter or Merge likewise anchors
    // nodes to their frame: they stay.
    if (p.op == "VariableV2" || is_control_flow_op(p.op) || r.placed(v) != r.placed(in.node) ||
        n.types[0] != p.types[size_t(in.index)])
      continue;
    r.replace_uses({v, 0}, in, data);
    r.replace_waits(v, in.node, control); // waiters on it now wait on its producer
    r.kill(v);
    ++identities;
  }
  // NoOps nobody fetches: their waiters wait on their inputs instead when that is no more edges.
  for (int v : r.topo_order()) {
    rnode& n = r.nodes[size_t(v)];
    if (n.op != "NoOp" || r.is_kept(v))
      continue;
    size_t in = n.control_inputs.size(), out = control[size_t(v)].size();
    if (in * out > in + out)
      continue;
    for (int w : control[size_t(v)]) {
      auto& ci = r.nodes[size_t(w)].control_inputs;
      ci.erase(std::remove(ci.begin(), ci.end(), v), ci.end());
      for (int c : n.control_inputs)
        if (std::find(ci.begin(), ci.end(), c) == ci.end()) {
          ci.push_back(c);
          control[size_t(c)].push_back(w);
        }
    }
    control[size_t(v)].clear();
    r.kill(v);
    ++noops;
  }
  if (identities + noops > 0)
    r.note("removed " + std::to_string(identities) + " pass-through nodes and " +
           std::to_string(noops) + " NoOps");
  return {};
}

namespace {

/// The part of a node that decides equality, as a string (tensor attributes by type, shape and
/// their first 64 bytes, so that large constants cost no pass each; attrs_equal compares them
/// whole when keys match).
std::string cse_key(const rgraph& r, int v) {
  const rnode& n = r.nodes[size_t(v)];
  std::string key = n.op + '|' + std::to_string(n.frame) + '|' + r.placed(v) + '|' + n.device + '|';
  for (auto e : n.inputs)
    key += std::to_string(e.node) + ':' + std::to_string(e.index) + ',';
  key += '|';
  std::vector<int> ci = n.control_inputs;
  std::sort(ci.begin(), ci.end());
  for (int c : ci)
    key += std::to_string(c) + ',';
  key += '|';
  for (auto& [name, value] : n.attrs) {
    key += name + '=';
    if (auto* t = std::get_if<tensor>(&value)) {
      key += std::string(runnel::name(t->type())) + t->shape().to_string();
      if (t->type() != dtype::string) {
        size_t bytes = std::min<size_t>(t->bytes(), 64);
        key.append(static_cast<const char*>(t->raw_data()), bytes);
      }
    } else {
      key += attr_to_string(value);
    }
    key += ';';
  }
  return key;
}

} // namespace

status eliminate_common_subexpressions(rgraph& r) {
  std::unordered_multimap<std::string, int> seen;
  auto data = r.consumers();
  auto control = r.control_consumers();
  int merged = 0;
  for (int v : r.topo_order()) {
    const rnode& n = r.nodes[size_t(v)];
    if (r.is_stateful(v) || (n.inputs.empty() && n.op != "Const"))
      continue;
    // A reader of a variable reads it when it runs: two such reads may see different values
    // (an update between them), as Grappler keeps nodes with ref inputs.
    if (std::any_of(n.inputs.begin(), n.inputs.end(),
                    [&](endpoint e) { return r.nodes[size_t(e.node)].op == "VariableV2"; }))
      continue;
    // A constant a stateful node reads (an initial value an Assign may adopt as the variable's
    // buffer, on a GPU) stays its own.
    if (n.op == "Const") {
      auto rs = r.readers(data, v);
      if (std::any_of(rs.begin(), rs.end(), [&](auto p) { return r.is_stateful(p.first); }))
        continue;
    }
    std::string key = cse_key(r, v);
    int same = -1;
    auto [lo, hi] = seen.equal_range(key);
    for (auto it = lo; it != hi && same < 0; ++it)
      if (attrs_equal(r.nodes[size_t(it->second)].attrs, n.attrs))
        same = it->second;
    if (same < 0 || r.is_kept(v)) {
      if (same < 0)
        seen.emplace(std::move(key), v);
      continue;
    }
    for (int i = 0; i < int(n.types.size()); ++i)
      r.replace_uses({v, i}, {same, i}, data);
    r.replace_waits(v, same, control);
    r.kill(v);
    ++merged;
  }
  if (merged > 0)
    r.note("merged " + std::to_string(merged) + " duplicate nodes");
  return {};
}

} // namespace runnel::optimize
