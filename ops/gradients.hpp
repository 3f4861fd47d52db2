#pragma once
// Symbolic gradients: nodes added to the graph that compute derivatives, as TensorFlow does.
//
//   auto loss = mean(sparse_softmax_cross_entropy_with_logits(logits, labels).first);
//   std::vector<output> g = gradients({loss}, {w.value, b.value});   // d loss / d w, d loss / d b
//
// `gradients(ys, xs, grad_ys)` computes d(Σ_i sum(ys[i] * grad_ys[i])) / d xs[j] (grad_ys
// default to ones). Every op on a path from an x to a y needs a gradient function; an op
// without one is an error naming it. An x that does not affect any y gets an invalid output
// (`valid() == false`), or zeros with `unconnected_zeros`. stop_gradient() blocks the flow.
// Gradient nodes are named "gradients/<node>_grad/...".

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/builder.hpp"

namespace runnel {

struct gradient_options {
  /// Give unconnected xs zeros (shaped like x) instead of an invalid output.
  bool unconnected_zeros = false;
};

/// Adds gradient nodes; throws runnel::error (naming the op) when one has no gradient.
std::vector<output> gradients(const std::vector<output>& ys, const std::vector<output>& xs,
                              const std::vector<output>& grad_ys = {},
                              gradient_options options = {});

/// What a gradient function sees: the forward node, its inputs and outputs as handles, and the
/// gradient flowing into each output (invalid where none flows).
struct gradient_context {
  graph& g;
  const node& n;
  std::vector<output> inputs;
  std::vector<output> outputs;
  std::vector<output> grads;
  /// Inside a while loop's gradient: maps a forward tensor to its value in the backward
  /// iteration (saved by the forward loop); unset elsewhere.
  std::function<output(output)> remap;
  /// Names this gradients() call (TensorArray gradients are kept per call).
  std::string source;

  output input(int i) const { return remap ? remap(inputs[size_t(i)]) : inputs[size_t(i)]; }
  output out(int i) const { return remap ? remap(outputs[size_t(i)]) : outputs[size_t(i)]; }
  /// A forward tensor other than the node's inputs and outputs, as the gradient sees it.
  output forward(output x) const { return remap ? remap(x) : x; }
  /// The gradient into output `i`, or zeros shaped like it when none flows.
  output grad(int i = 0) const;
};

/// Returns one gradient per input of the node (invalid output: no gradient for that input).
using gradient_function = std::function<std::vector<output>(const gradient_context&)>;

class gradient_registry {
public:
  void add(const std::string& op, gradient_function fn);
  /// Marks an op as having no gradient (integer-valued, shape, comparison ops...).
  void add_non_differentiable(const std::string& op);
  const gradient_function* find(const std::string& op) const;
  bool is_non_differentiable(const std::string& op) const;

private:
  std::unordered_map<std::string, gradient_function> fns_;
  std::unordered_map<std::string, bool> none_;
};

void register_math_gradients(gradient_registry& reg);
void register_nn_gradients(gradient_registry& reg);
/// TensorArray and Stack ops; the control-flow primitives are differentiated by gradients() itself.
void register_tensor_array_gradients(gradient_registry& reg);
/// Every builtin gradient function, built explicitly on first use.
const gradient_registry& builtin_gradients();

/// Sums `grad` (shaped like a broadcast result) down to the shape of `x`.
output sum_to_shape_of(output grad, output x);

} // namespace runnel
