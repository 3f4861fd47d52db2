#pragma once
// The while-loop frames of a graph's nodes, found from the graph alone: a frame starts at the
// Enters that name it (`frame_name`, within the enclosing frame) and ends at its Exits. Used by
// the partitioner (control loops per device), the Graphviz drawing (clusters) and the graph
// optimizer (which keeps every node in its frame).

#include <string>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

struct loop_frame {
  std::string name; ///< the Enters' frame_name (empty for the top level)
  int parent = 0;   ///< the enclosing frame (the top level is frame 0)
  int64_t parallel_iterations = 10;
  int loop_cond = -1;        ///< index into the node list of the frame's LoopCond, or -1
  std::vector<int> members;  ///< indices of the nodes whose outputs are in this frame
  std::vector<int> children; ///< frames directly inside this one
};

struct loop_frames {
  std::vector<loop_frame> frames; ///< frames[0] is the top level
  std::vector<int> frame_of;      ///< per node index: the frame its outputs are in
};

/// The frames of `nodes` (node ids in a topological order but for NextIteration -> Merge).
/// Inputs from nodes outside the list are ignored.
loop_frames find_loop_frames(const graph& g, const std::vector<int>& nodes);

} // namespace runnel
