// Multi-tensor optimizer updates: the ApplyAdam nodes of one GPU that share their scalars
// (learning rate, decays, the bias corrections' powers) and attributes become one
// _MultiApplyAdam node, which updates every variable in one launch (PyTorch's foreach Adam)
// instead of one node, one actor turn and one launch each. On CPUs the updates stay apart: there
// they run in parallel at their variables' actors.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "runnel/ops/optimize/rewrite.hpp"

namespace runnel::optimize {
namespace {

/// A live ApplyAdam on a GPU whose outputs nothing reads, at the top level (updates inside a
/// loop stay apart).
bool candidate(const rgraph& r, const std::vector<std::vector<std::pair<int, int>>>& data, int v) {
  const rnode& n = r.nodes[size_t(v)];
  return !n.dead && n.op == "ApplyAdam" && n.frame == 0 && !r.placed(v).empty() && !r.on_cpu(v) &&
         !r.is_kept(v) && r.readers(data, v).empty();
}

} // namespace

status fuse_optimizer_updates(rgraph& r) {
  if (!r.source->ops().find("_MultiApplyAdam"))
    return {};
  constexpr size_t adam_inputs = 10, first_scalar = 3, scalars = 6, grad = 9;
  auto data = r.consumers();
  auto control = r.control_consumers();
  // A scalar: the tensor it reads, or a constant's value (the optimizer makes a learning-rate
  // and decay constant per variable).
  auto scalar_key = [&](endpoint e) {
    if (const tensor* c = r.constant(e.node); c && c->host_readable() && c->num_elements() == 1) {
      char exact[40]; // every bit of the value
      std::snprintf(exact, sizeof exact, "%a", element_as_double(*c, 0));
      return "= " + std::string(name(c->type())) + " " + exact;
    }
    return "@ " + std::to_string(e.node) + ":" + std::to_string(e.index);
  };
  // (device, the scalars, T, use_nesterov, use_locking) -> ApplyAdam nodes
  using key = std::tuple<std::string, std::vector<std::string>, dtype, bool, bool>;
  std::map<key, std::vector<int>> groups;
  for (size_t v = 0; v < r.nodes.size(); ++v) {
    const rnode& n = r.nodes[v];
    if (!candidate(r, data, int(v)) || n.inputs.size() != adam_inputs)
      continue;
    auto flag = [&](const char* attr) {
      auto it = n.attrs.find(attr);
      return it != n.attrs.end() && std::get_if<bool>(&it->second) && std::get<bool>(it->second);
    };
    auto t = n.attrs.find("T");
    if (t == n.attrs.end() || !std::get_if<dtype>(&t->second))
      continue;
    std::vector<std::string> shared;
    for (size_t s = first_scalar; s < first_scalar + scalars; ++s)
      shared.push_back(scalar_key(n.inputs[s]));
    groups[{r.placed(int(v)), shared, std::get<dtype>(t->second), flag("use_nesterov"),
            flag("use_locking")}]
        .push_back(int(v));
  }
  // Whether two members update one variable or slot (the same variable twice in one step): one
  // update would lock it twice.
  auto shares_state = [&](const std::vector<int>& members) {
    std::set<int> states;
    for (int m : members)
      for (size_t slot = 0; slot < 3; ++slot)
        if (!states.insert(r.nodes[size_t(m)].inputs[slot].node).second)
          return true;
    return false;
  };
  // Whether some member waits, through its inputs, on another (a graph that updates one variable
  // before computing another's gradient): fused, they would wait on themselves.
  auto ordered = [&](const std::vector<int>& members) {
    std::vector<char> member(r.nodes.size(), 0), seen(r.nodes.size(), 0);
    for (int m : members)
      member[size_t(m)] = 1;
    std::vector<int> stack;
    for (int m : members) {
      for (auto e : r.nodes[size_t(m)].inputs)
        stack.push_back(e.node);
      for (int c : r.nodes[size_t(m)].control_inputs)
        stack.push_back(c);
    }
    while (!stack.empty()) {
      int v = stack.back();
      stack.pop_back();
      if (seen[size_t(v)]++)
        continue;
      if (member[size_t(v)])
        return true;
      for (auto e : r.nodes[size_t(v)].inputs)
        stack.push_back(e.node);
      for (int c : r.nodes[size_t(v)].control_inputs)
        stack.push_back(c);
    }
    return false;
  };
  int fused = 0, made = 0;
  for (auto& [k, members] : groups) {
    if (members.size() < 2 || shares_state(members) || ordered(members))
      continue;
    // The variables by name: every multi-tensor update locks them in one order.
    auto var_name = [&](int v) { return r.nodes[size_t(r.nodes[size_t(v)].inputs[0].node)].name; };
    std::sort(members.begin(), members.end(),
              [&](int a, int b) { return var_name(a) < var_name(b); });
    int root = members[0];
    std::vector<endpoint> inputs;
    for (size_t slot : {size_t(0), size_t(1), size_t(2)})
      for (int m : members)
        inputs.push_back(r.nodes[size_t(m)].inputs[slot]);
    for (size_t s = 0; s < scalars; ++s)
      inputs.push_back(r.nodes[size_t(root)].inputs[first_scalar + s]);
    for (int m : members)
      inputs.push_back(r.nodes[size_t(m)].inputs[grad]);
    std::vector<int> waits;
    for (int m : members)
      for (int c : r.nodes[size_t(m)].control_inputs)
        if (std::find(waits.begin(), waits.end(), c) == waits.end())
          waits.push_back(c);
    rnode& out = r.nodes[size_t(root)];
    out.name += "/_MultiApplyAdam";
    out.op = "_MultiApplyAdam";
    out.inputs = std::move(inputs);
    out.control_inputs = std::move(waits);
    out.attrs = {{"T", std::get<2>(k)},
                 {"N", int64_t(members.size())},
                 {"use_nesterov", std::get<3>(k)},
                 {"use_locking", std::get<4>(k)}};
    out.types.clear();
    out.shapes.clear();
    for (size_t i = 1; i < members.size(); ++i) {
      r.replace_waits(members[i], root, control);
      r.kill(members[i]);
    }
    fused += int(members.size());
    ++made;
  }
  if (made > 0)
    r.note("fused " + std::to_string(fused) + " ApplyAdam nodes into " + std::to_string(made) +
           " _MultiApplyAdam node" + (made == 1 ? "" : "s"));
  return {};
}

} // namespace runnel::optimize
