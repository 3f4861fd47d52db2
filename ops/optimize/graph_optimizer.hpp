#pragma once
// Graph optimization passes (TensorFlow's Grappler roles), run on the pruned graph of a signature
// before its node actors are spawned (actors/exec/session_build.cpp):
//
//   graph_optimizer_options opts;               // every pass on; RUNNEL_GRAPH_OPTIMIZER overrides
//   opts.cse = false;                           // one pass off, e.g. to bisect a wrong result
//   auto og = optimize_graph(g, needed, {feeds, fetches, targets}, opts, context);
//   // og->g: a new graph of the needed nodes, rewritten; og->origin: each node's source node
//
// The passes, in order (docs/graph_optimizer.md):
//   - pruning of Identity-like nodes and NoOps that nothing observes (ops/optimize/simplify.cpp);
//   - constant folding: a node whose inputs are all constants (or a Shape/Size/Rank of a fully
//     known shape) becomes a Const, computed once by its CPU kernel (constant_folding.cpp);
//   - common subexpression elimination (simplify.cpp);
//   - remapping into fused kernels: MatMul or Conv2D + BiasAdd (+Relu/Relu6/Elu/Tanh/Sigmoid),
//     FusedBatchNorm at inference folded into the convolution before it (remap.cpp);
//   - element-wise fusion: chains of element-wise ops over one shape become one
//     _FusedElementwise node, a small expression interpreter (elementwise_fusion.cpp);
//   - multi-tensor updates: a GPU's ApplyAdam nodes that share their scalars become one
//     _MultiApplyAdam node, one launch for all its variables (multi_tensor.cpp).
// Stateful nodes, control-flow nodes, fed and fetched tensors, targets and nodes on different
// devices are never merged or removed. Loops and conditionals keep their frames: the passes
// rewrite a loop's body in its frame (ops/graph/frames.hpp) and never join nodes of two frames;
// a value folded inside a loop or a branch still waits on what it was computed from.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

class kernel_registry;
class cpu_device;

struct graph_optimizer_options {
  bool prune_identities = true;
  bool constant_folding = true;
  bool cse = true;
  bool remapping = true;
  bool elementwise_fusion = true;
  bool multi_tensor_updates = true;
  /// Constant folding leaves a node whose outputs would be larger than this (bytes) as it is.
  int64_t max_folded_bytes = 10 << 20;

  bool any() const {
    return prune_identities || constant_folding || cse || remapping || elementwise_fusion ||
           multi_tensor_updates;
  }
  /// All passes off.
  static graph_optimizer_options none() { return {false, false, false, false, false, false}; }
  /// `base` changed by the environment variable RUNNEL_GRAPH_OPTIMIZER: "off" (every pass off),
  /// "on", or a comma-separated list of passes to switch off ("no-cse,no-remapping"; names:
  /// prune, folding, cse, remapping, fusion, multi-tensor). An unknown word is an error naming it.
  static result<graph_optimizer_options> from_environment(graph_optimizer_options base);
};

/// What the passes need from the runtime.
struct graph_optimizer_context {
  /// Kernels to fold constants with (CPU kernels of this registry); null: no constant folding.
  const kernel_registry* kernels = nullptr;
  /// The pool folded kernels may use (null: the calling thread).
  cpu_device* cpu = nullptr;
  /// The device each node of the source graph is placed on (full names), or empty when not
  /// placed: nodes on different devices are never merged, and fused kernels exist on CPUs only.
  std::vector<std::string> device_of_node;
  /// Lines describing what each pass did go here (null: nowhere; with verbose logging they also
  /// go to stderr).
  std::vector<std::string>* log = nullptr;
};

/// A signature's tensors in the source graph.
struct graph_signature {
  std::vector<endpoint> feeds;
  std::vector<endpoint> fetches;
  std::vector<int> targets;
};

/// The optimized graph of a signature.
struct optimized_graph {
  std::shared_ptr<graph> g;
  /// For each node of `g`: the node of the source graph it comes from (a fused node: its first
  /// node; a fed tensor's stand-in Placeholder: the node that produced the tensor).
  std::vector<int> origin;
  /// The signature in `g`: fed tensors are Placeholders (stand-ins named after the tensor).
  graph_signature signature;
  /// How many nodes the passes removed, and one line per change.
  int removed = 0;
  std::vector<std::string> changes;
};

/// The nodes of `g` flagged in `needed` (placement/prune.hpp), rewritten by the passes `opts`
/// switches on. Errors name the node at fault; a pass that cannot rewrite a node leaves it as
/// it is.
result<optimized_graph> optimize_graph(const graph& g, const std::vector<char>& needed,
                                       const graph_signature& signature,
                                       const graph_optimizer_options& opts,
                                       const graph_optimizer_context& context);

} // namespace runnel
