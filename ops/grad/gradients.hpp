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
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "runnel/ops/graph/builder.hpp"

namespace runnel {

struct gradient_options {
  /// Give unconnected xs zeros (shaped like x) instead of an invalid output.
  bool unconnected_zeros = false;
};

/// A gradient: a dense tensor or indexed slices (or nothing: `valid() == false`).
class gradient_value {
public:
  gradient_value() = default;
  gradient_value(output dense) : dense_(dense) {}
  gradient_value(indexed_slices s) : slices_(std::move(s)), sparse_(true) {}

  bool valid() const { return sparse_ || dense_.valid(); }
  bool is_sparse() const { return sparse_; }
  /// The dense tensor; for slices, a dense tensor built from them (UnsortedSegmentSum).
  output to_dense() const;
  const indexed_slices& slices() const { return slices_; }
  /// The values a norm or a clip acts on: the dense tensor, or the slices' values.
  output values() const { return sparse_ ? slices_.values : dense_; }
  /// The same gradient with its values replaced (e.g. scaled), indices kept.
  gradient_value with_values(output values) const;

private:
  output dense_;
  indexed_slices slices_;
  bool sparse_ = false;
};

/// Adds gradient nodes; throws runnel::error (naming the op) when one has no gradient.
std::vector<output> gradients(const std::vector<output>& ys, const std::vector<output>& xs,
                              const std::vector<output>& grad_ys = {},
                              gradient_options options = {});
/// Like gradients(), but an x whose gradient comes only from gathers along axis 0 (through
/// Identity) gets indexed slices instead of a dense tensor.
std::vector<gradient_value> gradient_values(const std::vector<output>& ys,
                                            const std::vector<output>& xs,
                                            const std::vector<output>& grad_ys = {},
                                            gradient_options options = {});
/// The slices concatenated into one (duplicates are kept: they add up when applied).
indexed_slices concat_slices(const std::vector<indexed_slices>& parts);

/// sqrt(Σ sum(t²)) over the gradients' values (invalid ones skipped).
output global_norm(const std::vector<gradient_value>& ts, std::string_view name = {});
/// TensorFlow's clip_by_global_norm: each t · clip_norm / max(global_norm, clip_norm), with the
/// norm measured before clipping; returns the clipped gradients (sparse ones stay sparse) and the
/// norm.
std::pair<std::vector<gradient_value>, output>
clip_by_global_norm(const std::vector<gradient_value>& ts, double clip_norm,
                    std::string_view name = {});

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
/// A gradient function that may return indexed slices for an input.
using sparse_gradient_function =
    std::function<std::vector<gradient_value>(const gradient_context&)>;

class gradient_registry {
public:
  void add(const std::string& op, gradient_function fn);
  /// A gradient function that may give indexed slices; takes precedence over a dense one.
  void add_sparse(const std::string& op, sparse_gradient_function fn);
  const sparse_gradient_function* find_sparse(const std::string& op) const;
  /// Marks an op as having no gradient (integer-valued, shape, comparison ops...).
  void add_non_differentiable(const std::string& op);
  const gradient_function* find(const std::string& op) const;
  bool is_non_differentiable(const std::string& op) const;
  /// The ops with a gradient function (dense or sparse), sorted by name.
  std::vector<std::string> differentiable_ops() const;
  /// The ops marked as having no gradient, sorted by name.
  std::vector<std::string> non_differentiable_ops() const;

private:
  std::unordered_map<std::string, gradient_function> fns_;
  std::unordered_map<std::string, sparse_gradient_function> sparse_fns_;
  std::unordered_map<std::string, bool> none_;
};

/// Starts the registration function of a gradient family, in its own file under ops/grad/:
///
///   RUNNEL_GRADIENT_FAMILY(linalg) {
///     reg.add("MatrixInverse", [](const gradient_context& c) { ... return {dx}; });
///   }
///
/// The build lists every such line (cmake/ops_families.cmake) and builtin_gradients() calls
/// them all: the macro begins its line, and the family is named by one lower-case word. A
/// family written in several files starts each file's part with
/// RUNNEL_GRADIENT_FAMILY_PART(family, part).
#define RUNNEL_GRADIENT_FAMILY(family)                                                             \
  void register_##family##_gradients(::runnel::gradient_registry& reg);                            \
  void register_##family##_gradients(::runnel::gradient_registry& reg)
#define RUNNEL_GRADIENT_FAMILY_PART(family, part) RUNNEL_GRADIENT_FAMILY(family##_##part)
/// Every builtin gradient function, built explicitly on first use.
const gradient_registry& builtin_gradients();

/// Sums `grad` (shaped like a broadcast result) down to the shape of `x`.
output sum_to_shape_of(output grad, output x);

/// The attributes `keys` of forward node `n`, for a gradient op that takes the same ones
/// (Conv2D's strides and padding for its backprop ops...).
attr_map same_attrs(const node& n, std::initializer_list<const char*> keys);

} // namespace runnel
