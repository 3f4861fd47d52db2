// The optimizer's driver: the needed nodes copied into an rgraph, the passes in order, and the
// result added node by node to a new graph (every node checked again as it is added).
#include "runnel/ops/optimize/graph_optimizer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <queue>
#include <sstream>

#include "runnel/ops/graph/frames.hpp"
#include "runnel/ops/optimize/rewrite.hpp"

namespace runnel {

result<graph_optimizer_options>
graph_optimizer_options::from_environment(graph_optimizer_options base) {
  const char* env = std::getenv("RUNNEL_GRAPH_OPTIMIZER");
  if (!env || !*env)
    return base;
  std::string value = env;
  if (value == "off" || value == "0" || value == "false")
    return none();
  if (value == "on" || value == "1" || value == "true")
    return graph_optimizer_options{};
  std::stringstream words(value);
  std::string word;
  while (std::getline(words, word, ',')) {
    bool off = word.rfind("no-", 0) == 0;
    std::string pass = off ? word.substr(3) : word;
    bool* flag = pass == "prune"       ? &base.prune_identities
                 : pass == "folding"   ? &base.constant_folding
                 : pass == "cse"       ? &base.cse
                 : pass == "remapping" ? &base.remapping
                 : pass == "fusion"    ? &base.elementwise_fusion
                 : pass == "multi-tensor" ? &base.multi_tensor_updates
                                       : nullptr;
    if (!flag)
      return invalid_argument("RUNNEL_GRAPH_OPTIMIZER: unknown word '" + word +
                              "' (expected off, on, or a list of [no-]prune, folding, cse, "
                              "remapping, fusion, multi-tensor)");
    *flag = !off;
  }
  return base;
}

namespace optimize {
namespace {

/// The needed nodes of `g`, with a stand-in Placeholder for each fed tensor whose node is not
/// needed.
rgraph copy_needed(const graph& g, const std::vector<char>& needed, const graph_signature& sig) {
  rgraph r;
  r.source = &g;
  std::vector<int> id_of(size_t(g.num_nodes()), -1), kept;
  for (int v = 0; v < g.num_nodes(); ++v)
    if (needed[size_t(v)])
      kept.push_back(v);
  loop_frames frames = find_loop_frames(g, kept);
  for (size_t i = 0; i < kept.size(); ++i) {
    const node& n = g.at(kept[i]);
    id_of[size_t(kept[i])] = int(r.nodes.size());
    r.nodes.push_back(rnode{.origin = kept[i],
                            .name = n.name,
                            .op = n.op,
                            .device = n.device,
                            .attrs = n.attrs,
                            .types = n.output_types,
                            .shapes = n.output_shapes,
                            .frame = frames.frame_of[i]});
    r.control_flow |= is_control_flow_op(n.op);
  }
  r.fed.assign(r.nodes.size(), 0);
  std::map<endpoint, endpoint> fed;
  for (auto e : sig.feeds) {
    if (id_of[size_t(e.node)] >= 0) {
      fed[e] = {id_of[size_t(e.node)], e.index};
      continue;
    }
    const node& n = g.at(e.node);
    bool plain = e.index == 0;
    for (auto f : sig.feeds)
      plain &= f.node != e.node || f.index == 0; // another output of it fed too: suffixes
    rnode p{.origin = e.node,
            .name = plain ? n.name : n.name + "/_feed_" + std::to_string(e.index),
            .op = "Placeholder",
            .device = n.device,
            .attrs = {{"dtype", n.output_types[size_t(e.index)]},
                      {"shape", n.output_shapes[size_t(e.index)]}},
            .types = {n.output_types[size_t(e.index)]},
            .shapes = {n.output_shapes[size_t(e.index)]}};
    fed[e] = {int(r.nodes.size()), 0};
    r.nodes.push_back(std::move(p));
    r.fed.push_back(1);
  }
  auto map = [&](endpoint e) {
    auto it = fed.find(e);
    return it != fed.end() ? it->second : endpoint{id_of[size_t(e.node)], e.index};
  };
  for (int v = 0; v < g.num_nodes(); ++v) {
    int id = id_of[size_t(v)];
    if (id < 0)
      continue;
    for (auto e : g.at(v).inputs)
      r.nodes[size_t(id)].inputs.push_back(map(e));
    for (int c : g.at(v).control_inputs)
      r.nodes[size_t(id)].control_inputs.push_back(id_of[size_t(c)]);
  }
  for (auto e : sig.feeds)
    r.signature.feeds.push_back(fed[e]);
  for (auto e : sig.fetches)
    r.signature.fetches.push_back(map(e));
  for (int t : sig.targets)
    r.signature.targets.push_back(id_of[size_t(t)]);
  return r;
}

/// The live nodes added to a new graph in a topological order (the source graph's where the
/// passes left it so).
result<optimized_graph> materialize(const rgraph& r) {
  size_t n = r.nodes.size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> out(n);
  for (size_t v = 0; v < n; ++v) {
    if (r.nodes[v].dead)
      continue;
    auto edge = [&](int u) {
      if (r.nodes[size_t(u)].dead)
        return false;
      out[size_t(u)].push_back(int(v));
      ++pending[v];
      return true;
    };
    for (auto e : r.nodes[v].inputs)
      if (r.nodes[size_t(e.node)].dead || !r.is_back_edge(int(v), e)) // added later by name
        if (!edge(e.node))
          return internal_error("graph optimizer: node '" + r.nodes[v].name +
                                "' reads the removed node '" + r.nodes[size_t(e.node)].name + "'");
    for (int c : r.nodes[v].control_inputs)
      if (!edge(c))
        return internal_error("graph optimizer: node '" + r.nodes[v].name +
                              "' waits on the removed node '" + r.nodes[size_t(c)].name + "'");
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (size_t v = 0; v < n; ++v)
    if (!r.nodes[v].dead && pending[v] == 0)
      ready.push(int(v));
  optimized_graph og;
  og.g = std::make_shared<graph>(r.source->ops());
  std::vector<int> new_id(n, -1);
  while (!ready.empty()) {
    int v = ready.top();
    ready.pop();
    const rnode& rn = r.nodes[size_t(v)];
    node_def def{
        .name = rn.name, .op = rn.op, .inputs = {}, .device = rn.device, .attrs = rn.attrs};
    for (auto e : rn.inputs)
      def.inputs.push_back(e.index == 0
                               ? r.nodes[size_t(e.node)].name
                               : r.nodes[size_t(e.node)].name + ":" + std::to_string(e.index));
    for (int c : rn.control_inputs)
      def.inputs.push_back("^" + r.nodes[size_t(c)].name);
    auto id = og.g->add_node(def);
    if (!id)
      return id.error().with_context("graph optimizer, rewriting node '" + rn.name + "'");
    new_id[size_t(v)] = *id;
    og.origin.push_back(rn.origin);
    for (int w : out[size_t(v)])
      if (--pending[size_t(w)] == 0)
        ready.push(w);
  }
  for (size_t v = 0; v < n; ++v)
    if (!r.nodes[v].dead && new_id[v] < 0)
      return internal_error("graph optimizer: node '" + r.nodes[v].name + "' is in a cycle");
  RUNNEL_RETURN_IF_ERROR(og.g->check_complete()); // every loop closed again
  auto map = [&](endpoint e) { return endpoint{new_id[size_t(e.node)], e.index}; };
  for (auto e : r.signature.feeds)
    og.signature.feeds.push_back(map(e));
  for (auto e : r.signature.fetches)
    og.signature.fetches.push_back(map(e));
  for (int t : r.signature.targets)
    og.signature.targets.push_back(new_id[size_t(t)]);
  og.removed = r.removed;
  og.changes = r.changes;
  return og;
}

} // namespace
} // namespace optimize

result<optimized_graph> optimize_graph(const graph& g, const std::vector<char>& needed,
                                       const graph_signature& signature,
                                       const graph_optimizer_options& opts,
                                       const graph_optimizer_context& context) {
  using namespace optimize;
  rgraph r = copy_needed(g, needed, signature);
  r.opts = &opts;
  r.context = &context;
  size_t before = 0;
  for (size_t v = 0; v < r.nodes.size(); ++v)
    before += r.fed[v] ? 0 : 1;
  struct pass {
    bool on;
    const char* name;
    status (*run)(rgraph&);
  };
  const pass passes[] = {{opts.prune_identities, "prune", prune_identities},
                         {opts.constant_folding && context.kernels, "folding", fold_constants},
                         {opts.cse, "cse", eliminate_common_subexpressions},
                         {opts.remapping, "remapping", remap_fused_ops},
                         {opts.elementwise_fusion, "fusion", fuse_elementwise},
                         {opts.multi_tensor_updates, "multi-tensor", fuse_optimizer_updates},
                         // Folding and fusion leave Identities and duplicates behind.
                         {opts.prune_identities, "prune", prune_identities},
                         {opts.cse, "cse", eliminate_common_subexpressions}};
  for (auto& p : passes) {
    if (!p.on)
      continue;
    size_t first = r.changes.size();
    RUNNEL_RETURN_IF_ERROR(p.run(r));
    for (size_t i = first; i < r.changes.size(); ++i)
      r.changes[i] = std::string(p.name) + ": " + r.changes[i];
  }
  RUNNEL_ASSIGN_OR_RETURN(auto og, materialize(r));
  std::string summary = "graph optimizer: " + std::to_string(before) + " nodes -> " +
                        std::to_string(og.g->num_nodes()) + " (" +
                        std::to_string(og.changes.size()) +
                        (og.changes.size() == 1 ? " change)" : " changes)");
  og.changes.push_back(summary);
  if (verbose_logging())
    for (auto& line : og.changes)
      std::fprintf(stderr, "runnel: %s\n", line.c_str());
  if (context.log)
    context.log->insert(context.log->end(), og.changes.begin(), og.changes.end());
  return og;
}

} // namespace runnel
