#pragma once
// Graphs as plain data: what a graph file (net/graph_def.hpp) or a TensorFlow GraphDef
// (storage/tf/) holds, before any validation, and the conversions to and from a graph.
//
//   graph_def def = to_graph_def(g);            // nodes, collections, seed
//   result<graph> back = from_graph_def(def);   // checks inputs, cycles, ops, attrs, shapes
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

/// A graph as plain data, before any validation: what a file holds.
struct graph_def {
  std::vector<node_def> nodes;
  std::map<std::string, std::vector<std::string>> collections;
  std::optional<int64_t> seed;
};

/// The graph's nodes, collections and seed as plain data.
graph_def to_graph_def(const graph& g);
/// Builds and validates a graph: dangling inputs, cycles, ops, attributes, dtypes, shapes.
result<graph> from_graph_def(const graph_def& def, const op_registry& ops = builtin_ops());

} // namespace runnel
