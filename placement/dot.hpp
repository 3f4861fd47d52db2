#pragma once
// Graphviz drawings of graphs, nodes colored by device.
//
//   std::cout << to_dot(g);                 // colored by each node's requested device
//   std::cout << to_dot(g, &assigned);      // colored by a placement (device name per node id)
//
// `dot -Tsvg graph.dot > graph.svg` renders it. Control edges are dashed; a legend lists the
// devices and their colors.

#include <string>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

std::string to_dot(const graph& g, const std::vector<std::string>* device_of_node = nullptr);

} // namespace runnel
