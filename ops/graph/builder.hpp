#pragma once
// The embedded graph-building API: free functions over `output` handles that read like the model.
//
//   graph g;
//   auto x = placeholder(g, dtype::f32, {-1, 4}, "x");
//   auto w = variable(g, truncated_normal(g, {4, 3}, 0.1f), "w");
//   auto b = variable(g, zeros(g, dtype::f32, {3}), "b");
//   auto y = softmax(matmul(x, w) + b);
//   auto init = global_variables_initializer(g);
//
// Every function checks dtypes and shapes when it adds its node and throws runnel::error (with
// the node's name) on a mistake; `graph::add_op` is the status-returning form underneath.
// The optional trailing `name` is a hint: it is made unique and placed under the name scope.

#include <initializer_list>
#include <string_view>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

// ---- constants and inputs ----
/// A Const node holding `value`.
output constant(graph& g, const tensor& value, std::string_view name = {});
template <class T> output constant(graph& g, T value, std::string_view name = {}) {
  return constant(g, tensor::scalar<T>(value), name);
}
template <class T>
output constant(graph& g, std::initializer_list<T> values, std::string_view name = {}) {
  return constant(g, tensor::vector<T>(std::vector<T>(values)), name);
}
template <class T>
output constant(graph& g, std::initializer_list<std::initializer_list<T>> rows,
                std::string_view name = {}) {
  std::vector<T> flat;
  int64_t cols = rows.size() ? int64_t(rows.begin()->size()) : 0;
  for (auto& r : rows) {
    if (int64_t(r.size()) != cols)
      throw error(invalid_argument("constant: rows have different lengths (" +
                                   std::to_string(cols) + " and " + std::to_string(r.size()) +
                                   ")"));
    flat.insert(flat.end(), r.begin(), r.end());
  }
  return constant(g, tensor::from_values<T>(shape{int64_t(rows.size()), cols}, std::move(flat)),
                  name);
}
/// A constant of shape `s` filled with `value` (converted to `t`).
output filled(graph& g, dtype t, const shape& s, double value, std::string_view name = {});
output zeros(graph& g, dtype t, const shape& s, std::string_view name = {});
output ones(graph& g, dtype t, const shape& s, std::string_view name = {});
/// A value fed at run time; `s` may have unknown dimensions (-1).
output placeholder(graph& g, dtype t, const shape& s = shape::unknown(),
                   std::string_view name = {});

// ---- variables ----
/// A variable node, its initializer and a read of its value. Converts to its value.
struct graph_variable {
  output ref;   ///< the VariableV2 node (what Assign and friends update)
  output value; ///< an Identity reading the current value
  operation initializer;
  operator output() const { return value; }
  const std::string& name() const { return ref.node().name; }
};
/// A variable initialised from `initial_value` (shape and dtype come from it); added to the
/// graph's "variables" collection.
/// Trainable variables are also listed in the "trainable_variables" collection, which
/// optimizers default to.
graph_variable variable(graph& g, output initial_value, std::string_view name = {},
                        bool trainable = true);
/// A variable of a given dtype and shape with no initializer (restored or assigned later).
graph_variable variable(graph& g, dtype t, const shape& s, std::string_view name = {},
                        bool trainable = true);
/// A variable of this process's own (TensorFlow's local variables, e.g. a replica's step): in
/// the "local_variables" collection only, so neither global_variables_initializer nor a saver
/// touches it.
graph_variable local_variable(graph& g, dtype t, const shape& s, std::string_view name = {});
output assign(const graph_variable& v, output value, std::string_view name = {});
output assign_add(const graph_variable& v, output value, std::string_view name = {});
output assign_sub(const graph_variable& v, output value, std::string_view name = {});
/// A NoOp that runs every variable's initializer.
operation global_variables_initializer(graph& g);
/// A NoOp that runs after all of `ops`.
operation group(graph& g, const std::vector<operation>& ops, std::string_view name = {});
operation no_op(graph& g, std::string_view name = {});

// ---- math ----
output add(output a, output b, std::string_view name = {});
output sub(output a, output b, std::string_view name = {});
output mul(output a, output b, std::string_view name = {});
output div(output a, output b, std::string_view name = {});
output pow(output a, output b, std::string_view name = {});
output maximum(output a, output b, std::string_view name = {});
output minimum(output a, output b, std::string_view name = {});
output greater(output a, output b, std::string_view name = {});
output less(output a, output b, std::string_view name = {});
output equal(output a, output b, std::string_view name = {});
output neg(output x, std::string_view name = {});
output exp(output x, std::string_view name = {});
output log(output x, std::string_view name = {});
output sqrt(output x, std::string_view name = {});
output square(output x, std::string_view name = {});
output tanh(output x, std::string_view name = {});
output sigmoid(output x, std::string_view name = {});
output relu(output x, std::string_view name = {});
/// Any row of ops/core/unary_ops.hpp by its enumerator (include that header to name one):
/// apply_unary(unary_op::Softsign, x). Declared here without the rows, so adding a row
/// rebuilds only what includes the table.
enum class unary_op : int;
output apply_unary(unary_op op, output x, std::string_view name = {});
/// Any row of ops/core/binary_ops.hpp by its enumerator, likewise:
/// apply_binary(binary_op::Atan2, y, x).
enum class binary_op : int;
output apply_binary(binary_op op, output a, output b, std::string_view name = {});
output cast(output x, dtype to, std::string_view name = {});
output floor_div(output a, output b, std::string_view name = {});
output floor_mod(output a, output b, std::string_view name = {});
output squared_difference(output a, output b, std::string_view name = {});
output greater_equal(output a, output b, std::string_view name = {});
output less_equal(output a, output b, std::string_view name = {});
output not_equal(output a, output b, std::string_view name = {});
output logical_and(output a, output b, std::string_view name = {});
output logical_or(output a, output b, std::string_view name = {});
output logical_not(output x, std::string_view name = {});
/// Picks `t` where `condition` holds, else `e` (condition: same shape, scalar, or per row).
output select(output condition, output t, output e, std::string_view name = {});
output abs(output x, std::string_view name = {});
output sign(output x, std::string_view name = {});
output log1p(output x, std::string_view name = {});
output rsqrt(output x, std::string_view name = {});
output reciprocal(output x, std::string_view name = {});
output sin(output x, std::string_view name = {});
output cos(output x, std::string_view name = {});
output relu6(output x, std::string_view name = {});
output elu(output x, std::string_view name = {});
output softplus(output x, std::string_view name = {});
/// Blocks gradients: `gradients` treats it as a constant.
output stop_gradient(output x, std::string_view name = {});
output add_n(const std::vector<output>& xs, std::string_view name = {});

output operator+(output a, output b);
output operator-(output a, output b);
output operator*(output a, output b);
output operator/(output a, output b);
output operator-(output a);
// With a C++ number on one side: the number becomes a constant of the tensor's dtype.
output operator+(output a, double b);
output operator+(double a, output b);
output operator-(output a, double b);
output operator-(double a, output b);
output operator*(output a, double b);
output operator*(double a, output b);
output operator/(output a, double b);
output operator/(double a, output b);

struct matmul_attrs {
  bool transpose_a = false;
  bool transpose_b = false;
};
output matmul(output a, output b, matmul_attrs attrs = {}, std::string_view name = {});

// ---- reductions (axes empty = all) ----
output sum(output x, std::vector<int64_t> axes = {}, bool keep_dims = false,
           std::string_view name = {});
output mean(output x, std::vector<int64_t> axes = {}, bool keep_dims = false,
            std::string_view name = {});
output reduce_max(output x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                  std::string_view name = {});
output reduce_min(output x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                  std::string_view name = {});
output reduce_prod(output x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                   std::string_view name = {});
/// Logical and/or over axes of a bool tensor.
output reduce_all(output x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                  std::string_view name = {});
output reduce_any(output x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                  std::string_view name = {});
output argmax(output x, int64_t axis, dtype output_type = dtype::i64, std::string_view name = {});
output argmin(output x, int64_t axis, dtype output_type = dtype::i64, std::string_view name = {});
/// Sum over axes given as a tensor (computed in the graph).
output sum(output x, output axes, bool keep_dims = false, std::string_view name = {});

// ---- arrays ----
output identity(output x, std::string_view name = {});
output size(output x, dtype out_type = dtype::i32, std::string_view name = {});
output rank(output x, std::string_view name = {});
/// `size` -1 means "to the end of that dimension".
output slice(output x, std::vector<int64_t> begin, std::vector<int64_t> size,
             std::string_view name = {});
output slice(output x, output begin, output size, std::string_view name = {});
output expand_dims(output x, int64_t axis, std::string_view name = {});
/// Sums rows of `data` into `num_segments` rows by `segment_ids` (the gradient of gather).
output unsorted_segment_sum(output data, output segment_ids, output num_segments,
                            std::string_view name = {});
output shape_of(output x, dtype out_type = dtype::i32, std::string_view name = {});
output reshape(output x, std::vector<int64_t> new_shape, std::string_view name = {});
output reshape(output x, output new_shape, std::string_view name = {});
output transpose(output x, std::vector<int64_t> perm = {}, std::string_view name = {});
output concat(const std::vector<output>& values, int64_t axis, std::string_view name = {});
output fill(output dims, output value, std::string_view name = {});
output zeros_like(output x, std::string_view name = {});
output ones_like(output x, std::string_view name = {});
output gather(output params, output indices, int64_t axis = 0, std::string_view name = {});
output one_hot(output indices, int64_t depth, double on_value = 1.0, double off_value = 0.0,
               dtype t = dtype::f32, int64_t axis = -1, std::string_view name = {});
/// Passes `x` through, printing `message` and its values to stderr each time it runs.
output print(output x, std::string message, std::string_view name = {});
/// TensorFlow's Assert: an operation that fails the step with invalid_argument when `condition`
/// (a bool scalar) is false; the message is `data` joined by spaces (string scalars as they
/// are, other tensors' first `summarize` values). Make what must wait for the check depend on it
/// (graph::control_dependencies).
operation assert_that(output condition, const std::vector<output>& data, int64_t summarize = 3,
                      std::string_view name = {});

/// Stacks same-shaped tensors along a new axis (Pack) and splits them apart again (Unpack).
output stack(const std::vector<output>& values, int64_t axis = 0, std::string_view name = {});
std::vector<output> unstack(output x, int64_t num, int64_t axis = 0, std::string_view name = {});
/// `num` equal parts along `axis`.
std::vector<output> split(output x, int64_t num, int64_t axis = 0, std::string_view name = {});
/// Removes dimensions of size 1 (the given ones, or all).
output squeeze(output x, std::vector<int64_t> axes = {}, std::string_view name = {});
output tile(output x, std::vector<int64_t> multiples, std::string_view name = {});
/// Zero padding: one {before, after} pair per dimension.
output pad(output x, std::vector<std::pair<int64_t, int64_t>> paddings, std::string_view name = {});
output reverse(output x, std::vector<int64_t> axes, std::string_view name = {});
/// TensorFlow's strided slice: x[begin:end:stride, ...] with the masks of tf.strided_slice
/// (bit i of a mask applies to entry i of begin/end/strides).
output strided_slice(output x, std::vector<int64_t> begin, std::vector<int64_t> end,
                     std::vector<int64_t> strides, int64_t begin_mask = 0, int64_t end_mask = 0,
                     int64_t ellipsis_mask = 0, int64_t new_axis_mask = 0,
                     int64_t shrink_axis_mask = 0, std::string_view name = {});
output range(graph& g, output start, output limit, output delta, std::string_view name = {});
/// The rows (first dimension) in a random order, reproducibly with seeds.
output random_shuffle(output x, int64_t seed = 0, std::string_view name = {});
output batch_matmul(output x, output y, bool adj_x = false, bool adj_y = false,
                    std::string_view name = {});
output matrix_inverse(output x, bool adjoint = false, std::string_view name = {});
output matrix_determinant(output x, std::string_view name = {});

// ---- neural networks ----
output log_softmax(output logits, std::string_view name = {});
/// TopKV2: the `k` largest entries of each row of `x` (its last dimension), largest first (ties
/// by lower index), and their int32 indices. No gradient.
std::pair<output, output> top_k(output x, output k, std::string_view name = {});
/// sum(t²) / 2.
output l2_loss(output t, std::string_view name = {});
/// Whether each target's prediction is among the `k` largest in its row (ties count as in).
output in_top_k(output predictions, output targets, int64_t k, std::string_view name = {});
output bias_add(output value, output bias, std::string_view name = {});
output softmax(output logits, std::string_view name = {});
/// Per-example loss (output 0) and its gradient with respect to the logits (output 1).
std::pair<output, output> softmax_cross_entropy_with_logits(output logits, output labels,
                                                            std::string_view name = {});
std::pair<output, output> sparse_softmax_cross_entropy_with_logits(output logits, output labels,
                                                                   std::string_view name = {});

/// 2-D convolution, NHWC input and HWIO filter. `strides` = {sh, sw}; padding "SAME" or "VALID".
output conv2d(output input, output filter, std::vector<int64_t> strides = {1, 1},
              const std::string& padding = "SAME", std::string_view name = {});
output max_pool(output input, std::vector<int64_t> window, std::vector<int64_t> strides,
                const std::string& padding = "VALID", std::string_view name = {});
output avg_pool(output input, std::vector<int64_t> window, std::vector<int64_t> strides,
                const std::string& padding = "VALID", std::string_view name = {});

// ---- random (seeded as in TensorFlow: graph seed + op seed; 0 = unset) ----
/// The `seed` and `seed2` attributes of a random op with op seed `op_seed` in `g`.
std::pair<int64_t, int64_t> seeds(graph& g, int64_t op_seed);
output random_uniform(graph& g, const shape& s, dtype t = dtype::f32, int64_t seed = 0,
                      std::string_view name = {});
output random_normal(graph& g, const shape& s, double stddev = 1.0, dtype t = dtype::f32,
                     int64_t seed = 0, std::string_view name = {});
output truncated_normal(graph& g, const shape& s, double stddev = 1.0, dtype t = dtype::f32,
                        int64_t seed = 0, std::string_view name = {});
/// TensorFlow's tf.multinomial: `num_samples` class indices per row of `logits` [batch,
/// classes], drawn with the probabilities softmax(row); [batch, num_samples] of `out` (i64 or
/// i32).
output multinomial(output logits, int64_t num_samples, int64_t seed = 0, dtype out = dtype::i64,
                   std::string_view name = {});

/// A gradient given as some rows of a dense tensor, TensorFlow's IndexedSlices: the dense value
/// is zero except that row indices[i] adds values[i] (duplicate indices add up). The gradient of
/// a gather along axis 0 (an embedding lookup) is one, so a 1M-row table's gradient costs only
/// the rows looked up.
struct indexed_slices {
  output values;      ///< [n, rest of the dense shape...]
  output indices;     ///< [n], i32 or i64
  output dense_shape; ///< the dense tensor's shape, i64 vector
};

} // namespace runnel
