#pragma once
// The backward pass of gradients(), shared by ops/grad/gradients.cpp (the walk over ordinary ops) and
// ops/grad/control_flow_grad.cpp (conds and while loops). Not public.
//
// Every forward context has a gradient context where its gradient nodes go: the top level and a
// cond branch at the top level are their own; a while loop's is its backward loop, which runs as
// many iterations as the forward one did, in reverse; a cond branch inside a loop gets a branch of
// the backward loop on the same predicate. A forward tensor of a loop that a gradient needs is
// saved by the forward loop in a TensorArray (one element per iteration, written at the forward
// iteration's index) and read back in the backward iteration with the same index.

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "runnel/ops/layers/control_flow_internal.hpp"
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

class backprop {
public:
  backprop(graph& g, int num_nodes, std::vector<char> from_x, std::vector<char> to_y,
           std::string source)
      : g_(g), n_(num_nodes), from_x_(std::move(from_x)), to_y_(std::move(to_y)),
        source_(std::move(source)) {}

  /// Gradient contributions not yet summed, and the sums taken, by forward endpoint.
  std::map<endpoint, std::vector<output>> pending;
  std::map<endpoint, output> finished;
  /// The same for gradients given as indexed slices (from gathers), kept sparse while they
  /// flow through Identity to a variable; total() makes them dense.
  std::map<endpoint, std::vector<indexed_slices>> pending_slices;
  std::map<endpoint, indexed_slices> finished_slices;

  /// The summed gradient of `e` (invalid when none), built in the current context.
  output total(endpoint e);
  /// The gradient of `e` as the caller of gradient_values() gets it: indexed slices when only
  /// slices arrived, else dense.
  gradient_value result(endpoint e);
  /// Runs the gradient functions of the nodes of forward loop `scope` (null: the top level),
  /// consumers first; a nested loop is differentiated as a whole when its last node is reached.
  void walk(const while_context* scope);

  /// `x` (a forward tensor) as the gradient being built sees it.
  output forward_value(output x);
  /// Where the gradient nodes of forward context `forward` go.
  flow_context* grad_context(const flow_context* forward);
  bool on_path(int v) const { return v < n_ && from_x_[size_t(v)] && to_y_[size_t(v)]; }
  graph& g() { return g_; }
  const std::string& source() const { return source_; }

private:
  struct loop_state;
  void process(int v);
  bool pass_slices(int v);
  /// Whether only indexed slices (no dense gradient) arrived at `e`.
  bool only_slices(endpoint e) const;
  void differentiate_loop(while_context& loop);
  /// The loops of `scope` on the path, by the id of their last node (where walk differentiates
  /// them).
  std::map<int, const while_context*> loop_triggers(const while_context* scope) const;
  void cond_merge_grad(const node& merge, const std::vector<output>& grads);
  void cond_switch_grad(const node& sw, const cond_context& branch, output grad);

  graph& g_;
  int n_;
  std::vector<char> from_x_, to_y_;
  std::string source_;
  /// Backward loops being built, innermost last.
  std::vector<std::shared_ptr<loop_state>> loops_;
  std::set<const while_context*> done_loops_;
  std::map<const flow_context*, flow_context*> grad_contexts_;
  std::map<std::pair<endpoint, const flow_context*>, output> copies_;
};

/// The innermost while loop enclosing `c` (null: none).
const while_context* enclosing_loop(const flow_context* c);

} // namespace runnel
