#pragma once
// The control-flow contexts behind cond and while_loop, shared by ops/layers/control_flow.cpp (which
// builds them) and ops/grad/control_flow_grad.cpp (which differentiates through them). Not public.

#include <map>
#include <string>
#include <vector>

#include "runnel/ops/layers/control_flow.hpp"

namespace runnel {

/// One branch of a cond: outer tensors come in through Switch(value, pred)[branch].
class cond_context : public flow_context {
public:
  cond_context(output pred, int branch, std::string name)
      : pred_(pred), branch_(branch), name_(std::move(name)) {}
  result<endpoint> import(graph& g, endpoint e) override;
  std::string describe() const override {
    return std::string(branch_ ? "the true" : "the false") + " branch of cond '" + name_ + "'";
  }
  bool gates_refs() const override { return true; }
  output pred() const { return pred_; }
  int branch() const { return branch_; }
  const std::string& name() const { return name_; }

private:
  output pred_;
  int branch_;
  std::string name_;
  std::map<endpoint, endpoint> imported_;
};

/// A loop body: outer tensors come in as loop invariants, Enter(is_constant) into the frame.
/// Records the loop's structure, so that loop variables can be added later (gradients do).
class while_context : public flow_context {
public:
  while_context(std::string name, std::string frame, int parallel_iterations)
      : name_(std::move(name)), frame_(std::move(frame)), parallel_(parallel_iterations) {}
  result<endpoint> import(graph& g, endpoint e) override;
  std::string describe() const override {
    return "while loop '" + name_ + "' (frame '" + frame_ + "')";
  }
  attr_map enter_attrs(bool is_constant) const {
    return {{"frame_name", frame_},
            {"is_constant", is_constant},
            {"parallel_iterations", int64_t(parallel_)}};
  }
  const std::string& name() const { return name_; }
  int parallel_iterations() const { return parallel_; }
  /// Loop invariants: the Enter(is_constant) made for each outer endpoint.
  const std::map<endpoint, endpoint>& invariants() const { return imported_; }

  /// One loop variable's nodes.
  struct variable {
    int enter = -1, merge = -1, switch_op = -1, exit = -1, body = -1, next = -1;
  };
  std::vector<variable> vars;
  int loop_cond = -1;

private:
  std::string name_, frame_;
  int parallel_;
  std::map<endpoint, endpoint> imported_;
};

/// Adds a loop variable to the loop of `ctx`, whose LoopCond exists: Enter(initial) → Merge →
/// Switch → Exit, and Identity → `next(body value)` → NextIteration → Merge. `initial` is a tensor
/// of the loop's enclosing context; `next` runs with the graph in the loop context. Returns the
/// variable's nodes; its Exit is the value after the loop.
while_context::variable add_loop_variable(graph& g, while_context& ctx, output initial,
                                          const std::function<output(output)>& next,
                                          const shape& invariant);

/// The start of a loop variable (Enter and Merge): split from add_loop_variable so that a loop's
/// condition can read its Merges before the LoopCond exists.
void begin_loop_variable(graph& g, while_context& ctx, output initial, const shape& invariant);
/// Finishes the variables begun since `first` once `ctx.loop_cond` is set: Switch, Exit and the
/// body's Identity for each.
void switch_loop_variables(graph& g, while_context& ctx, size_t first);
/// Closes variable `k` with `value` as its next value (NextIteration and the back edge).
void close_loop_variable(graph& g, while_context& ctx, size_t k, output value);

} // namespace runnel
