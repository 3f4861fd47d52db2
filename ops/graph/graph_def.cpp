// Graphs as plain data and back: every node's definition, the collections and the seed, rebuilt
// in an order where each node follows its inputs (a loop's back edge excepted).
#include "runnel/ops/graph/graph_def.hpp"

#include <string_view>
#include <unordered_map>

namespace runnel {
namespace {

/// Orders node_defs so every node follows its inputs; names dangling inputs and cycles.
result<std::vector<size_t>> topological_order(const std::vector<node_def>& defs) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < defs.size(); ++i)
    if (!index.emplace(defs[i].name, i).second)
      return invalid_argument("two nodes are named '" + defs[i].name + "'");
  std::vector<std::vector<size_t>> deps(defs.size());
  for (size_t i = 0; i < defs.size(); ++i)
    for (auto& in : defs[i].inputs) {
      std::string_view name = in;
      if (!name.empty() && name[0] == '^')
        name.remove_prefix(1);
      else if (auto colon = name.rfind(':'); colon != std::string_view::npos)
        name = name.substr(0, colon);
      auto it = index.find(std::string(name));
      if (it == index.end())
        return invalid_argument("node '" + defs[i].name + "' (op " + defs[i].op + "): input '" +
                                in + "' refers to node '" + std::string(name) +
                                "', which is not in the graph");
      // A loop's back edge (NextIteration -> Merge) is the one edge that may close a cycle.
      if (defs[i].op == "Merge" && defs[it->second].op == "NextIteration")
        continue;
      deps[i].push_back(it->second);
    }
  // Iterative DFS: 0 = new, 1 = on the stack, 2 = done.
  std::vector<int> mark(defs.size(), 0);
  std::vector<size_t> order;
  for (size_t root = 0; root < defs.size(); ++root) {
    if (mark[root])
      continue;
    std::vector<std::pair<size_t, size_t>> stack{{root, 0}};
    mark[root] = 1;
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      if (next < deps[v].size()) {
        size_t w = deps[v][next++];
        if (mark[w] == 1) {
          std::string cycle = defs[w].name;
          for (auto it = stack.rbegin(); it != stack.rend() && it->first != w; ++it)
            cycle = defs[it->first].name + " -> " + cycle;
          return invalid_argument("the graph has a cycle: " + defs[w].name + " -> " + cycle);
        }
        if (mark[w] == 0) {
          mark[w] = 1;
          stack.emplace_back(w, 0);
        }
      } else {
        mark[v] = 2;
        order.push_back(v);
        stack.pop_back();
      }
    }
  }
  return order;
}

} // namespace

graph_def to_graph_def(const graph& g) {
  graph_def def;
  for (auto& n : g.nodes())
    def.nodes.push_back(n.to_def(g));
  for (auto c : {"variables", "trainable_variables", "initializers"})
    for (int id : g.collection(c))
      def.collections[c].push_back(g.at(id).name);
  def.seed = g.seed();
  return def;
}

result<graph> from_graph_def(const graph_def& def, const op_registry& ops) {
  RUNNEL_ASSIGN_OR_RETURN(auto order, topological_order(def.nodes));
  graph g(ops);
  for (size_t i : order)
    RUNNEL_RETURN_IF_ERROR(g.add_node(def.nodes[i]).error());
  RUNNEL_RETURN_IF_ERROR(g.check_complete());
  for (auto& [name, nodes] : def.collections)
    for (auto& n : nodes) {
      auto id = g.find(n);
      if (!id)
        return invalid_argument("collection '" + name + "' names node '" + n +
                                "', which is not in the graph");
      g.add_to_collection(name, *id);
    }
  if (def.seed)
    g.set_seed(*def.seed);
  return g;
}

} // namespace runnel
