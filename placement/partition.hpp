#pragma once
// The partitioner: one subgraph per device, with Send/Recv pairs on every cut edge.
//
//   auto parts = partition(g, nodes, device_of).value();   // device_of: a full name per node
//   for (auto& p : parts) { graph sub; for (auto& n : p.nodes) sub.add_node(n); ... }
//
// Each data edge from device A to device B becomes a `_Send` on A and one `_Recv` on B per
// (tensor, destination device): two consumers on B of one tensor share a Recv. A control edge
// across devices becomes a Send of an empty constant that runs after the source, and a Recv the
// destination waits for. Send and Recv carry the same rendezvous key, in TensorFlow's format:
//   src_device;src_incarnation;dst_device;tensor_name;frame_id:iter_id
// e.g. /job:localhost/replica:0/task:0/device:CPU:0;0000000000000001;
//      /job:localhost/replica:0/task:0/device:CPU:1;edge_4_layer/MatMul:0;0:0

#include <cstdint>
#include <string>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

struct graph_partition {
  std::string device;
  std::vector<node_def> nodes; ///< in an order add_node accepts (inputs first)
};

struct partition_options {
  /// Incarnation of each sending device (TensorFlow tells restarted processes apart with it).
  int64_t incarnation = 1;
};

/// The rendezvous key of a Send/Recv pair.
std::string rendezvous_key(const std::string& src_device, int64_t src_incarnation,
                           const std::string& dst_device, const std::string& tensor_name,
                           const std::string& frame_iter = "0:0");

/// Cuts `nodes` (ids of `g` in topological order; their inputs must be among them) into one
/// partition per device of `device_of` (parallel to `nodes`), in order of first appearance.
result<std::vector<graph_partition>> partition(const graph& g, const std::vector<int>& nodes,
                                               const std::vector<std::string>& device_of,
                                               const partition_options& options = {});

} // namespace runnel
