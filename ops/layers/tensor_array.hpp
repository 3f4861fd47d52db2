#pragma once
// TensorArray and Stack in the builder: lists of tensors that live for one step, for loops that
// produce or consume one element per iteration (TensorFlow's tf.TensorArray).
//
//   tensor_array out(g, dtype::f32, constant(g, 0), {.dynamic_size = true});
//   auto r = while_loop(cond, [&](const std::vector<output>& v) {
//     auto h = tanh(matmul(inputs.read(v[0]), w) + matmul(v[1], u));
//     return std::vector<output>{v[0] + one, h, out.with_flow(v[2]).write(v[0], h).flow};
//   }, {zero, h0, out.flow});
//   output all = out.with_flow(r[2]).stack();        // [time, batch, hidden]
//
// A tensor_array value is a handle plus a `flow` (a float scalar): each write returns a new value
// whose flow orders later reads after it. Inside a loop the flow is a loop variable; the handle
// is used from outside directly. Gradients flow through every operation (ops/grad/gradients.hpp).

#include <string>

#include "runnel/ops/graph/builder.hpp"

namespace runnel {

struct tensor_array_options {
  /// Writes past the end grow the array.
  bool dynamic_size = false;
  /// A read frees its element (the element can be read once).
  bool clear_after_read = true;
  /// The shape of every element, where known (reads and stacks get it as their static shape).
  shape element_shape = shape::unknown();
  std::string name = "TensorArray";
};

class tensor_array {
public:
  /// A new array of `size` (an int32 scalar) elements of `type`.
  tensor_array(graph& g, dtype type, output size, tensor_array_options options = {});
  /// An existing array with another flow (e.g. a loop variable's value).
  tensor_array with_flow(output flow) const;

  output handle() const { return handle_; }
  output flow() const { return flow_; }
  dtype type() const { return type_; }
  const shape& element_shape() const { return element_shape_; }

  tensor_array write(output index, output value) const;
  output read(output index) const;
  /// Elements `indices` stacked along a new first dimension.
  output gather(output indices) const;
  /// Every element, stacked along a new first dimension (`gather(range(size()))`).
  output stack() const;
  /// Row k of `value` to element `indices[k]`.
  tensor_array scatter(output indices, output value) const;
  /// Row k of `value` to element k.
  tensor_array unstack(output value) const;
  /// `value` cut along its first dimension into pieces of `lengths` (int64).
  tensor_array split(output value, output lengths) const;
  /// Every element joined along the first dimension.
  output concat() const;
  output size() const;
  operation close() const;
  /// The gradient array of this one for the gradients() call named `source`.
  tensor_array grad(const std::string& source, output flow) const;

  /// An array from a handle and a flow (e.g. the inputs of a TensorArray node).
  tensor_array(output handle, output flow, dtype type, shape element_shape)
      : handle_(handle), flow_(flow), type_(type), element_shape_(std::move(element_shape)) {}

private:
  output handle_, flow_;
  dtype type_ = dtype::f32;
  shape element_shape_ = shape::unknown();
};

/// A step-scoped stack (StackV2): push returns its input, pop the last pushed value.
struct stack_handle {
  output handle;
  dtype type;
};
stack_handle make_stack(graph& g, dtype type, int32_t max_size = -1,
                        std::string_view name = "Stack");
output stack_push(const stack_handle& s, output value);
output stack_pop(const stack_handle& s);
operation stack_close(const stack_handle& s);

} // namespace runnel
