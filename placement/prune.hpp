#pragma once
// Pruning: the nodes a run needs. A session (for one signature) and a cluster master (before
// partitioning) both prune the same way, here.
//
//   auto needed = prune(g, {loss.node_id(), train.node_id()}, {{x.node_id(), 0}});
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

/// A flag per node of `g`: whether computing `roots` needs it, walking back from them through
/// data and control inputs. A data input that is one of `fed` is not followed (its value is
/// given); a root is always needed (callers leave out fetches that are fed).
std::vector<char> prune(const graph& g, const std::vector<int>& roots,
                        const std::vector<endpoint>& fed = {});

} // namespace runnel
