// Element-wise fusion: a tree of float32 element-wise ops on one CPU, whose inner values nothing
// else reads, becomes one _FusedElementwise node (ops/cpu/fused_elementwise.cpp), a small
// interpreter that makes one pass over memory instead of one per op, and one firing.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/optimize/rewrite.hpp"

namespace runnel::optimize {

status fuse_elementwise(rgraph& r) {
  if (!r.source->ops().find("_FusedElementwise"))
    return {};
  constexpr size_t max_ops = 32;
  auto data = r.consumers();
  auto control = r.control_consumers();
  auto order = r.topo_order();
  std::vector<int> position(r.nodes.size(), -1);
  for (size_t i = 0; i < order.size(); ++i)
    position[size_t(order[i])] = int(i);
  auto candidate = [&](int v) {
    const rnode& n = r.nodes[size_t(v)];
    auto t = n.attrs.find("T");
    return !n.dead && t != n.attrs.end() && std::get_if<dtype>(&t->second) &&
           std::get<dtype>(t->second) == dtype::f32 && n.types.size() == 1 &&
           (n.inputs.size() == 1 || n.inputs.size() == 2) && n.control_inputs.empty() &&
           fused_elementwise_runs(n.op) && r.on_cpu(v) && !r.is_stateful(v);
  };
  std::vector<char> grouped(r.nodes.size(), 0);
  int groups = 0, fused = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    int root = *it;
    if (grouped[size_t(root)] || !candidate(root))
      continue;
    // Grow towards the inputs: a producer joins when every reader of it is in the group.
    std::vector<int> members{root};
    std::unordered_set<int> in_group{root};
    for (size_t i = 0; i < members.size() && members.size() < max_ops; ++i)
      for (auto e : r.nodes[size_t(members[i])].inputs) {
        int u = e.node;
        if (in_group.count(u) || grouped[size_t(u)] || !candidate(u) || r.is_kept(u) ||
            !control[size_t(u)].empty() || r.placed(u) != r.placed(root) ||
            members.size() >= max_ops)
          continue;
        auto rs = r.readers(data, u);
        if (std::all_of(rs.begin(), rs.end(), [&](auto p) { return in_group.count(p.first); })) {
          members.push_back(u);
          in_group.insert(u);
        }
      }
    if (members.size() < 2)
      continue;
    std::sort(members.begin(), members.end(),
              [&](int a, int b) { return position[size_t(a)] < position[size_t(b)]; });
    // The program: external inputs first, then one instruction per member.
    std::vector<endpoint> inputs;
    std::unordered_map<int, int64_t> reg_of; // member -> instruction
    std::vector<std::string> ops;
    std::vector<int64_t> operands;
    auto operand = [&](endpoint e) -> int64_t {
      if (auto m = reg_of.find(e.node); m != reg_of.end())
        return m->second;
      auto at = std::find(inputs.begin(), inputs.end(), e);
      if (at == inputs.end()) {
        inputs.push_back(e);
        return int64_t(inputs.size() - 1);
      }
      return int64_t(at - inputs.begin());
    };
    // Operands name inputs by index; instructions by index + N, fixed up once N is known.
    constexpr int64_t instruction_flag = int64_t(1) << 40;
    for (int m : members) {
      const rnode& n = r.nodes[size_t(m)];
      ops.push_back(n.op);
      for (size_t s = 0; s < 2; ++s)
        operands.push_back(s < n.inputs.size() ? operand(n.inputs[s]) : -1);
      reg_of[m] = instruction_flag + int64_t(ops.size() - 1);
    }
    int64_t n_in = int64_t(inputs.size());
    for (auto& a : operands)
      if (a >= instruction_flag)
        a = a - instruction_flag + n_in;
    rnode& out = r.nodes[size_t(root)];
    shape out_shape = out.shapes[0];
    out.op = "_FusedElementwise";
    out.inputs = inputs;
    out.attrs = {{"T", dtype::f32},
                 {"N", n_in},
                 {"ops", ops},
                 {"operands", operands},
                 {"out_shape", out_shape}};
    for (size_t s = 0; s < inputs.size(); ++s)
      data[size_t(inputs[s].node)].emplace_back(root, int(s));
    for (int m : members) {
      grouped[size_t(m)] = 1;
      if (m != root)
        r.kill(m);
    }
    ++groups;
    fused += int(members.size());
  }
  if (groups > 0)
    r.note("fused " + std::to_string(fused) + " element-wise nodes into " + std::to_string(groups) +
           " _FusedElementwise nodes");
  return {};
}

} // namespace runnel::optimize
