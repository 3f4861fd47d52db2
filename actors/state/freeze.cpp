#include "runnel/actors/state/freeze.hpp"

#include "runnel/placement/prune.hpp"

namespace runnel {
namespace {

bool changes_state(const node& n) {
  static const std::vector<std::string_view> ops{"Assign",     "AssignAdd",  "AssignSub",
                                                 "ScatterAdd", "ScatterSub", "ScatterUpdate"};
  if (n.op.rfind("Apply", 0) == 0 || n.op.rfind("SparseApply", 0) == 0 ||
      n.op.rfind("Queue", 0) == 0 || n.op.rfind("ResourceApply", 0) == 0)
    return true;
  for (auto op : ops)
    if (n.op == op)
      return true;
  return false;
}

} // namespace

status freeze_graph(session& s, const graph& g, const std::vector<std::string>& outputs, graph& out,
                    freeze_stats* stats) {
  if (out.num_nodes() != 0)
    return invalid_argument("freeze_graph: the graph to freeze into must be empty");
  std::vector<int> roots;
  for (auto& name : outputs) {
    auto bare = name.substr(0, name.find(':'));
    auto id = g.find(bare);
    if (!id)
      return not_found("freeze_graph: the graph has no node '" + bare + "'");
    roots.push_back(*id);
  }
  if (roots.empty())
    return invalid_argument("freeze_graph: name at least one output to keep");
  auto needed = prune(g, roots, {});
  freeze_stats st;
  if (auto seed = g.seed())
    out.set_seed(*seed);
  // Checked before anything is added: a refusal leaves `out` empty.
  for (int id = 0; id < g.num_nodes(); ++id)
    if (needed[size_t(id)] && changes_state(g.at(id)))
      return failed_precondition("freeze_graph: node '" + g.at(id).name + "' (op " + g.at(id).op +
                                 ") changes state; freeze an inference output, not a training "
                                 "step");
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (!needed[size_t(id)])
      continue;
    const node& n = g.at(id);
    node_def def = n.to_def(g);
    def.device.clear();
    if (n.op == "VariableV2") {
      auto value = s.run({}, {output(const_cast<graph*>(&g), endpoint{id, 0})});
      if (!value)
        return value.error().with_context("freeze_graph: reading variable '" + n.name + "'");
      tensor t = std::move(value).value()[0];
      st.constant_bytes += int64_t(t.bytes());
      ++st.variables;
      def.op = "Const";
      def.inputs.clear();
      def.attrs = {{"value", t}, {"dtype", t.type()}};
    }
    if (auto added = out.add_node(def); !added)
      return added.error().with_context("freeze_graph: copying node '" + n.name + "'");
    ++st.nodes;
  }
  if (stats)
    *stats = st;
  return {};
}

} // namespace runnel
