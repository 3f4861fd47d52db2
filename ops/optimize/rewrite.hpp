#pragma once
// The graph the optimization passes rewrite (internal to ops/optimize/): a copy of the needed
// nodes whose inputs, ops and attributes passes may change and which they may kill; turned into
// a new `graph` at the end, where every node is checked again as it is added.

#include <string>
#include <vector>

#include "runnel/ops/optimize/graph_optimizer.hpp"

namespace runnel::optimize {

struct rnode {
  int origin = -1; ///< the source graph's node
  std::string name, op, device;
  attr_map attrs;
  std::vector<endpoint> inputs; ///< into rgraph::nodes
  std::vector<int> control_inputs;
  std::vector<dtype> types;
  std::vector<shape> shapes;
  /// The while-loop frame its outputs are in (ops/graph/frames.hpp; 0: the top level). Passes
  /// never join nodes of different frames, and a node they make takes its frame from the nodes
  /// it replaces.
  int frame = 0;
  bool dead = false;
};

struct rgraph {
  const graph* source = nullptr;
  const graph_optimizer_options* opts = nullptr;
  const graph_optimizer_context* context = nullptr;
  std::vector<rnode> nodes;
  graph_signature signature; ///< in rgraph node ids
  std::vector<char> fed;     ///< per node: a feed's stand-in
  bool control_flow = false; ///< some node is a Switch, Merge, Enter, ... (loops, conditionals)
  std::vector<std::string> changes;
  int removed = 0;

  /// Data consumers of every node (live nodes only): (consumer, input slot).
  std::vector<std::vector<std::pair<int, int>>> consumers() const;
  /// The live nodes reading `v` in `consumers` (from consumers(), possibly with stale entries
  /// for inputs rewired since): (reader, slot).
  std::vector<std::pair<int, int>>
  readers(const std::vector<std::vector<std::pair<int, int>>>& consumers, int v) const;
  /// Control consumers of every node (live nodes only).
  std::vector<std::vector<int>> control_consumers() const;
  /// Whether the node is fetched, a target, or a feed's stand-in: never removed or replaced.
  bool is_kept(int v) const;
  /// Whether the node is a feed's stand-in or a fed tensor's producer: its value comes from the
  /// caller, at the top level, and the node never runs.
  bool is_fed(int v) const;
  /// Whether some fetch reads output `e`.
  bool is_fetched(endpoint e) const;
  /// Every data input and fetch reading `from` reads `to` instead; `consumers` (from
  /// consumers()) is kept up to date.
  void replace_uses(endpoint from, endpoint to,
                    std::vector<std::vector<std::pair<int, int>>>& consumers);
  /// Every node waiting on `from` waits on `to` instead (once); `control` (from
  /// control_consumers()) is kept up to date.
  void replace_waits(int from, int to, std::vector<std::vector<int>>& control);
  /// The device the node is placed on (empty: not placed).
  const std::string& placed(int v) const;
  bool on_cpu(int v) const;
  /// A Const node's value, or null.
  const tensor* constant(int v) const;
  /// Live nodes, every node after its inputs (ties by id; a loop's back edge, NextIteration ->
  /// Merge, does not count).
  std::vector<int> topo_order() const;
  /// Whether input `e` of node `v` closes a loop (a Merge's input from a NextIteration).
  bool is_back_edge(int v, endpoint e) const {
    return nodes[size_t(v)].op == "Merge" && nodes[size_t(e.node)].op == "NextIteration";
  }
  /// Stateful ops, control-flow ops (the frames' structure), Placeholders, _Send and _Recv:
  /// never merged, folded or removed.
  bool is_stateful(int v) const;
  /// Kills nodes nothing reads or waits on that are neither kept nor stateful.
  void remove_unused();
  /// Kills `v` (counts it as removed).
  void kill(int v);
  void note(std::string change) { changes.push_back(std::move(change)); }
};

// The passes, each over live nodes; each returns an error only for a broken invariant.
status prune_identities(rgraph& r);
status fold_constants(rgraph& r);
status eliminate_common_subexpressions(rgraph& r);
status remap_fused_ops(rgraph& r);
status fuse_elementwise(rgraph& r);
status fuse_optimizer_updates(rgraph& r);

/// Whether two attribute maps are equal (tensors compared by type, shape and bytes).
bool attrs_equal(const attr_map& a, const attr_map& b);

} // namespace runnel::optimize
