#pragma once
// Conditionals and loops in a graph, built from TensorFlow's v1 control-flow primitives (Switch,
// Merge, Enter, Exit, NextIteration, LoopCond) and run by the executor with frames, iterations
// and deadness (docs/control_flow.md).
//
//   auto y = cond(less(x, zero), [&] { return neg(x); }, [&] { return x * 2.0; });
//
//   // sum of 0..n-1, with the loop counter and the accumulator as loop variables
//   auto out = while_loop(
//       [&](const std::vector<output>& v) { return less(v[0], n); },
//       [&](const std::vector<output>& v) { return std::vector<output>{v[0] + one, v[1] + v[0]}; },
//       {zero, zero}, {.parallel_iterations = 10});
//
// Inside a branch or a loop body, tensors from outside may be used directly: they are imported
// (through a Switch into a branch, as a loop invariant into a loop). Tensors made inside can
// leave only through the cond's or loop's outputs; anything else is an error naming both nodes
// and the context. The graph owns what these functions create; errors throw runnel::error.

#include <functional>
#include <string>
#include <vector>

#include "runnel/ops/graph/builder.hpp"

namespace runnel {

using branch_fn = std::function<std::vector<output>()>;

/// The outputs of `true_fn` when the bool scalar `pred` is true, else those of `false_fn`. Only
/// the branch taken runs. Both branches must give the same number of outputs with the same
/// dtypes; where their shapes differ the result's dimension is unknown.
std::vector<output> cond(output pred, const branch_fn& true_fn, const branch_fn& false_fn,
                         std::string_view name = "cond");
/// cond with one output.
output cond(output pred, const std::function<output()>& true_fn,
            const std::function<output()>& false_fn, std::string_view name = "cond");

/// The first branch whose predicate is true, else `default_fn` (TensorFlow's tf.case with
/// exclusive = false: predicates are tried in order).
std::vector<output> case_of(const std::vector<std::pair<output, branch_fn>>& branches,
                            const branch_fn& default_fn, std::string_view name = "case");
/// `branches[index]`, or the last branch when the int32 scalar `index` is out of range
/// (TensorFlow's tf.switch_case).
std::vector<output> switch_case(output index, const std::vector<branch_fn>& branches,
                                std::string_view name = "switch_case");

struct while_options {
  /// Iterations that may run at once (the loop's back-pressure).
  int parallel_iterations = 10;
  /// Stop after this many iterations even when the condition still holds (-1: no bound). As in
  /// TensorFlow, reaching it ends the loop normally.
  int64_t maximum_iterations = -1;
  /// Per loop variable, the shape it may take across iterations (e.g. {-1, 256} for a growing
  /// first dimension); empty: every variable keeps its initial shape.
  std::vector<shape> shape_invariants;
  std::string name = "while";
};

using loop_cond_fn = std::function<output(const std::vector<output>&)>;
using loop_body_fn = std::function<std::vector<output>(const std::vector<output>&)>;

/// Repeats `body` on the loop variables while `cond` (a bool scalar) holds; returns their final
/// values. The body returns as many tensors as there are loop variables, with the same dtypes
/// and shapes compatible with the shape invariants.
std::vector<output> while_loop(const loop_cond_fn& cond, const loop_body_fn& body,
                               std::vector<output> loop_vars, const while_options& options = {});

} // namespace runnel
