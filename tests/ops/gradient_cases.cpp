// The finite-difference checks of every op with a gradient, by family. gradients_test.cpp runs
// them all and fails when an op in builtin_gradients() has none here: a new gradient comes with
// its row. Inputs are float64 where the op takes it; ops with float32 kernels only are checked
// through casts with a wider step and tolerance.
#include "runnel/ops/core/binary_ops.hpp"
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/layers/lstm_block.hpp"
#include "runnel/ops/layers/tensor_array.hpp"
#include "runnel/tests/ops/gradient_check.hpp"

namespace runnel::testing {
namespace {

using cases = std::vector<gradient_case>;

output f32(output o) {
  return cast(o, dtype::f32);
}
output i32(graph& g, std::vector<int32_t> v) {
  return constant(g, tensor::vector<int32_t>(v));
}

/// Every row of ops/core/unary_ops.hpp with a gradient (Sign and Floor are piecewise constant).
void unary(cases& c) {
  auto any = random_input({2, 3}, 0.2, 1.5, 5, true);
  auto pos = random_input({2, 3}, 0.2, 1.5, 6);
  for (auto& u : unary_ops) {
    if (builtin_gradients().is_non_differentiable(u.name))
      continue;
    bool positive = u.op == unary_op::Log || u.op == unary_op::Log1p || u.op == unary_op::Sqrt ||
                    u.op == unary_op::Rsqrt || u.op == unary_op::Reciprocal;
    std::string name = u.name;
    c.push_back({name,
                 [name](graph& g, auto& x) { return g.build(name, name, {x[0].ep()})[0]; },
                 {positive ? pos : any}});
  }
  c.push_back({"Identity", [](graph&, auto& x) { return identity(x[0]); }, {any}});
  c.push_back({"Print", [](graph&, auto& x) { return print(x[0], "passing through: "); }, {any}});
  c.push_back({"PlaceholderWithDefault",
               [](graph& g, auto& x) {
                 return g.build("PlaceholderWithDefault", "with_default", {x[0].ep()},
                                {{"dtype", dtype::f64}, {"shape", x[0].shape()}})[0];
               },
               {any}});
  c.push_back({"IdentityN",
               [](graph& g, auto& x) {
                 auto ids = g.build("IdentityN", "ids", {x[0].ep(), x[1].ep()},
                                    {{"T", std::vector<dtype>{dtype::f64, dtype::f64}}});
                 return ids[0] * ids[1]; // each output's gradient to its own input
               },
               {any, pos}});
  c.push_back({"Cast",
               [](graph&, auto& x) { return cast(f32(x[0]), dtype::f64) * 2.0; },
               {any},
               2e-3,
               1e-2}); // linear: float32 rounding is the only error
}

/// Broadcasting binary ops (a row of one shape against a matrix), AddN and Select.
void binary(cases& c) {
  auto a = random_input({2, 3}, 0.5, 1.5, 1, true);
  auto row = random_input({3}, 0.5, 1.5, 2, true);
  auto col = random_input({2, 1}, 0.5, 1.5, 3, true);
  auto pos = random_input({2, 3}, 0.5, 1.5, 4);
  c.push_back({"Add", [](graph&, auto& x) { return x[0] + x[1]; }, {a, row}});
  c.push_back({"Sub", [](graph&, auto& x) { return x[0] - x[1]; }, {col, a}});
  c.push_back({"Mul", [](graph&, auto& x) { return x[0] * x[1]; }, {a, col}});
  c.push_back({"Div", [](graph&, auto& x) { return x[0] / x[1]; }, {a, row}});
  c.push_back({"Pow", [](graph&, auto& x) { return pow(x[0], x[1]); }, {pos, row}});
  c.push_back({"Maximum", [](graph&, auto& x) { return maximum(x[0], x[1]); }, {a, row}});
  c.push_back({"Minimum", [](graph&, auto& x) { return minimum(x[0], x[1]); }, {a, col}});
  c.push_back({"SquaredDifference",
               [](graph&, auto& x) { return squared_difference(x[0], x[1]); },
               {a, row}});
  c.push_back({"Atan2",
               [](graph&, auto& x) { return apply_binary(binary_op::Atan2, x[0], x[1]); },
               {a, col}});
  c.push_back({"FloorMod",
               [](graph& g, auto& x) { return floor_mod(x[0], constant(g, 0.7)); },
               {random_f64({2, 3}, 11)}});
  c.push_back({"AddN", [](graph&, auto& x) { return add_n({x[0], x[1], x[0]}); }, {a, pos}});
  c.push_back({"Select",
               [](graph&, auto& x) { return select(greater(x[0], x[1]), x[0], x[1] * 2.0); },
               {a, pos}});
}

void matmul_and_linalg(cases& c) {
  auto a = random_input({2, 3}, 0.5, 1.5, 7, true);
  auto b = random_input({3, 4}, 0.5, 1.5, 8, true);
  auto at = random_input({3, 2}, 0.5, 1.5, 9, true);
  auto bt = random_input({4, 3}, 0.5, 1.5, 10, true);
  c.push_back({"MatMul", [](graph&, auto& x) { return matmul(x[0], x[1]); }, {a, b}});
  c.push_back({"MatMul",
               [](graph&, auto& x) {
                 return matmul(x[0], x[1], {true, false});
               },
               {at, b}});
  c.push_back({"MatMul",
               [](graph&, auto& x) {
                 return matmul(x[0], x[1], {false, true});
               },
               {a, bt}});
  c.push_back({"MatMul",
               [](graph&, auto& x) {
                 return matmul(x[0], x[1], {true, true});
               },
               {at, bt}});
  auto batch = random_f64({2, 2, 3}, 2);
  c.push_back({"BatchMatMul",
               [](graph&, auto& x) { return batch_matmul(x[0], x[0], false, true); },
               {batch}});
  c.push_back({"BatchMatMul",
               [](graph&, auto& x) { return batch_matmul(x[0], x[0], true, false); },
               {batch}});
  auto square = random_f64({2, 3, 3}, 3);
  for (int64_t i = 0; i < 2; ++i) // well-conditioned: add 3·I
    for (int64_t j = 0; j < 3; ++j)
      square.data<double>()[i * 9 + j * 4] += 3;
  c.push_back({"MatrixInverse", [](graph&, auto& x) { return matrix_inverse(x[0]); }, {square}});
  c.push_back(
      {"MatrixDeterminant", [](graph&, auto& x) { return matrix_determinant(x[0]); }, {square}});
}

void reductions(cases& c) {
  auto a = random_input({2, 3, 2}, 0.5, 1.5, 11, true);
  c.push_back({"Sum", [](graph&, auto& x) { return sum(x[0], {1}); }, {a}});
  c.push_back({"Sum", [](graph&, auto& x) { return sum(x[0], {0, 2}, true); }, {a}});
  c.push_back({"Mean", [](graph&, auto& x) { return mean(x[0], {2}); }, {a}});
  c.push_back({"Mean", [](graph&, auto& x) { return mean(x[0]); }, {a}});
  c.push_back({"Max", [](graph&, auto& x) { return reduce_max(x[0], {1}); }, {a}});
  c.push_back({"Min", [](graph&, auto& x) { return reduce_min(x[0], {0, 2}); }, {a}});
  c.push_back({"Prod", [](graph&, auto& x) { return reduce_prod(x[0], {1}); }, {a}});
  c.push_back({"Prod", // no, one and two zeros in a row
               [](graph&, auto& x) { return reduce_prod(x[0], {1}); },
               {vals<double>({3, 3}, {0.5, 2, -1, 0, 3, 2, 0, 0, 4})}});
  c.push_back({"L2Loss", [](graph&, auto& x) { return l2_loss(x[0]); }, {a}});
}

void shapes(cases& c) {
  auto a = random_input({2, 3, 2}, 0.5, 1.5, 11, true);
  auto b = random_input({2, 2, 2}, 0.5, 1.5, 12, true);
  auto m = random_f64({2, 3}, 1);
  c.push_back({"Reshape", [](graph&, auto& x) { return reshape(x[0], {3, 4}); }, {a}});
  c.push_back({"ExpandDims", [](graph&, auto& x) { return expand_dims(x[0], 1); }, {a}});
  c.push_back({"Squeeze", [](graph&, auto& x) { return squeeze(expand_dims(x[0], 0)); }, {m}});
  c.push_back({"Transpose", [](graph&, auto& x) { return transpose(x[0], {2, 0, 1}); }, {a}});
  c.push_back({"ConcatV2", [](graph&, auto& x) { return concat({x[0], x[1]}, 1); }, {a, b}});
  // Lengths along the axis unknown until the step runs (a state of unknown width, say).
  c.push_back({"ConcatV2",
               [](graph&, auto& x) {
                 auto u0 = reshape(x[0], shape_of(x[0])), u1 = reshape(x[1], shape_of(x[1]));
                 REQUIRE(u0.shape()[1] < 0);
                 return reshape(concat({u0, u1}, 1), std::vector<int64_t>{2, 5, 2});
               },
               {a, b}});
  c.push_back({"Pack", [](graph&, auto& x) { return stack({x[0], x[0] * 2.0}, 1); }, {m}});
  c.push_back({"Unpack", [](graph&, auto& x) { return unstack(x[0], 2, 0)[1]; }, {m}});
  c.push_back({"Split",
               [](graph&, auto& x) { return split(x[0], 3, 1)[2] * 3.0 + split(x[0], 3, 1)[0]; },
               {m}});
  c.push_back({"Tile", [](graph&, auto& x) { return tile(x[0], {2, 2}); }, {m}});
  c.push_back({"Pad", [](graph&, auto& x) { return pad(x[0], {{1, 2}, {0, 1}}); }, {m}});
  c.push_back({"ReverseV2", [](graph&, auto& x) { return reverse(x[0], {1}); }, {m}});
  c.push_back({"ReverseSequence",
               [](graph& g, auto& x) {
                 auto lengths = constant(g, tensor::vector<int64_t>({2, 0, 3}));
                 // x [3, 4]: batch on 0, time on 1; rows reversed over their first 2, 0, 3.
                 return g.build("ReverseSequence", "rs", {x[0].ep(), lengths.ep()},
                                {{"seq_dim", int64_t(1)}, {"batch_dim", int64_t(0)}})[0] *
                        constant(g, tensor::vector<double>({1, 2, 3, 4}));
               },
               {random_input({3, 4}, 0.5, 1.5, 11, true)}});
  c.push_back({"Fill",
               [](graph& g, auto& x) {
                 return fill(constant(g, {2, 2}), sum(x[0]));
               },
               {m}});
  auto s = random_f64({3, 4}, 9);
  c.push_back({"Slice", [](graph&, auto& x) { return slice(x[0], {1, 1}, {2, -1}); }, {s}});
  c.push_back({"StridedSlice",
               [](graph&, auto& x) {
                 return strided_slice(x[0], {0, 3}, {0, 0}, {2, -2}, 0b01, 0b11);
               },
               {s}});
  c.push_back({"StridedSlice",
               [](graph&, auto& x) { return strided_slice(x[0], {1}, {2}, {1}, 0, 0, 0, 0, 1); },
               {s}});
}

void indexing(cases& c) {
  auto p = random_input({4, 3}, 0.5, 1.5, 13, true);
  c.push_back({"GatherV2",
               [](graph& g, auto& x) {
                 return gather(x[0], i32(g, {3, 0, 3, 1}));
               },
               {p}});
  c.push_back({"UnsortedSegmentSum",
               [](graph& g, auto& x) {
                 return unsorted_segment_sum(x[0], constant(g, {1, 0}), constant(g, 3));
               },
               {random_f64({2, 3}, 11)}});
  c.push_back({"GatherV2", // along an inner axis
               [](graph& g, auto& x) {
                 return gather(x[0], constant(g, {2, 0, 2}), 1);
               },
               {random_f64({2, 3, 2}, 13)}});
  auto data = random_input({5, 2}, 0.5, 1.5, 19, true);
  auto parts = [](graph& g) { return i32(g, {1, 0, 1, 1, 0}); };
  c.push_back(
      {"DynamicPartition",
       [parts](graph& g, auto& x) {
         auto pieces = dynamic_partition(x[0], parts(g), 2);
         return reshape(concat({pieces[0] * 2.0, pieces[1]}, 0), std::vector<int64_t>{5, 2});
       },
       {data}});
  c.push_back(
      {"DynamicStitch",
       [](graph& g, auto& x) {
         auto merged = dynamic_stitch({i32(g, {3, 0}), i32(g, {1, 2, 4})}, {x[0], x[1] * 3.0});
         return reshape(merged, std::vector<int64_t>{5, 2});
       },
       {random_input({2, 2}, 0.5, 1.5, 20, true), random_input({3, 2}, 0.5, 1.5, 21)}});
}

void nn(cases& c) {
  auto v = random_input({3, 4}, 0.5, 1.5, 14, true);
  auto bias = random_input({4}, 0.5, 1.5, 15, true);
  c.push_back({"BiasAdd", [](graph&, auto& x) { return bias_add(x[0], x[1]); }, {v, bias}});
  c.push_back({"Softmax", [](graph&, auto& x) { return softmax(x[0]); }, {v}});
  c.push_back({"LogSoftmax", [](graph&, auto& x) { return log_softmax(x[0]); }, {v}});
  auto labels = random_input({3, 4}, 0.1, 1.0, 16);
  for (int r = 0; r < 3; ++r) { // labels are distributions, as the op requires
    double total = 0;
    for (int j = 0; j < 4; ++j)
      total += labels.data<double>()[r * 4 + j];
    for (int j = 0; j < 4; ++j)
      labels.data<double>()[r * 4 + j] /= total;
  }
  c.push_back({"SoftmaxCrossEntropyWithLogits",
               [labels](graph& g, auto& x) {
                 return softmax_cross_entropy_with_logits(x[0], constant(g, labels)).first;
               },
               {v}});
  c.push_back({"SoftmaxCrossEntropyWithLogits", // with respect to the labels
               [](graph& g, auto& x) {
                 auto logits = constant(g, vals<double>({2, 3}, {1, 2, 3, 0, -1, 1}));
                 return softmax_cross_entropy_with_logits(logits, x[0]).first;
               },
               {random_f64({2, 3}, 12)}});
  c.push_back(
      {"SparseSoftmaxCrossEntropyWithLogits",
       [](graph& g, auto& x) {
         return sparse_softmax_cross_entropy_with_logits(x[0], constant(g, {3, 0, 2})).first;
       },
       {v}});
  auto bx = random_input({4, 2, 2, 3}, 0.1, 1.0, 24, true);
  auto gamma = random_input({3}, 0.5, 1.5, 25), beta = random_input({3}, 0.1, 0.5, 26, true);
  c.push_back({"FusedBatchNorm",
               [](graph& g, auto& x) {
                 auto unused = zeros(g, dtype::f32, shape{3}); // the moving mean and variance
                 return g.build(
                     "FusedBatchNorm", "bn",
                     {f32(x[0]).ep(), f32(x[1]).ep(), f32(x[2]).ep(), unused.ep(), unused.ep()},
                     {{"epsilon", 1e-3}, {"is_training", true}})[0];
               },
               {bx, gamma, beta},
               5e-3,
               1e-2});
}

/// Conv2D and pooling (float32 kernels: central differences with a wide step).
void conv(cases& c) {
  auto x = random_input({2, 5, 5, 3}, 0.1, 1.0, 21, true);
  auto f = random_input({3, 3, 3, 4}, 0.1, 1.0, 22, true);
  for (std::string padding : {"SAME", "VALID"})
    for (int64_t stride : {1, 2})
      c.push_back({"Conv2D",
                   [padding, stride](graph&, auto& in) {
                     return conv2d(f32(in[0]), f32(in[1]), {stride, stride}, padding);
                   },
                   {x, f},
                   2e-3,
                   1e-2});
  auto p = random_input({1, 4, 4, 2}, 0.1, 1.0, 23, true); // distinct values: no ties
  c.push_back({"MaxPool",
               [](graph&, auto& in) {
                 return max_pool(f32(in[0]), {2, 2}, {2, 2});
               },
               {p},
               2e-3,
               1e-3});
  c.push_back({"AvgPool",
               [](graph&, auto& in) {
                 return avg_pool(f32(in[0]), {3, 3}, {1, 1}, "SAME");
               },
               {p},
               2e-3,
               1e-2});
}

/// The fused LSTM (float32 only), peepholes and clipping on: inputs x, cs, h, w, b, then the
/// three peephole vectors.
void lstm(cases& c) {
  const int batch = 2, in = 3, units = 2, time = 3;
  std::vector<tensor> cell{random_input({batch, in}, 0.1, 1.0, 30, true),
                           random_input({batch, units}, 0.1, 0.5, 31, true),
                           random_input({batch, units}, 0.1, 0.5, 32, true),
                           random_input({in + units, 4 * units}, 0.1, 0.5, 33, true),
                           random_input({4 * units}, 0.1, 0.5, 34, true),
                           random_input({units}, 0.1, 0.5, 35, true),
                           random_input({units}, 0.1, 0.5, 36, true),
                           random_input({units}, 0.1, 0.5, 37, true)};
  lstm_block_options o{.forget_bias = 0.7, .cell_clip = 3.0, .use_peephole = true};
  c.push_back({"LSTMBlockCell",
               [o](graph&, auto& x) {
                 auto s = lstm_block_cell(f32(x[0]), f32(x[1]), f32(x[2]), f32(x[3]), f32(x[4]), o,
                                          f32(x[5]), f32(x[6]), f32(x[7]));
                 return s.h + s.cs * 0.5;
               },
               cell, 5e-3, 1e-2});
  auto seq = cell;
  seq[0] = random_input({time, batch, in}, 0.1, 1.0, 38, true);
  c.push_back({"BlockLSTM",
               [o](graph& g, auto& x) {
                 auto s = block_lstm(constant(g, int64_t(2)), f32(x[0]), f32(x[1]), f32(x[2]),
                                     f32(x[3]), f32(x[4]), o, f32(x[5]), f32(x[6]), f32(x[7]));
                 return s.h + s.cs * 0.5;
               },
               seq, 5e-3, 1e-2});
  // The fused GRU step (TensorFlow's GRUBlockCell): x, h_prev, w_ru, w_c, b_ru, b_c.
  std::vector<tensor> gru{random_input({batch, in}, 0.1, 1.0, 50, true),
                          random_input({batch, units}, 0.1, 0.5, 51, true),
                          random_input({in + units, 2 * units}, 0.1, 0.5, 52, true),
                          random_input({in + units, units}, 0.1, 0.5, 53, true),
                          random_input({2 * units}, 0.1, 0.5, 54, true),
                          random_input({units}, 0.1, 0.5, 55, true)};
  c.push_back({"GRUBlockCell",
               [](graph& g, auto& x) {
                 std::vector<endpoint> in;
                 for (int i = 0; i < 6; ++i)
                   in.push_back(f32(x[size_t(i)]).ep());
                 return g.build("GRUBlockCell", "gru", in)[3]; // h: what flows back
               },
               gru, 5e-3, 1e-2});
}

/// TensorArrays: each way in paired with a way out. Split and concat use pieces of unequal
/// lengths, whose gradient array must keep each element's own shape.
void tensor_arrays(cases& c) {
  auto a = random_input({3, 2}, 0.5, 1.5, 40, true);
  auto options = [] {
    tensor_array_options o;
    o.element_shape = shape{2};
    return o;
  };
  auto size3 = [](graph& g) { return constant(g, int32_t(3)); };
  c.push_back(
      {"TensorArrayWriteV3",
       [=](graph& g, auto& x) {
         tensor_array ta(g, dtype::f64, size3(g), options());
         auto w =
             ta.write(constant(g, int32_t(0)), x[0] * 2.0).write(constant(g, int32_t(2)), x[0]);
         auto first = w.read(constant(g, int32_t(0)));
         return reshape(first * w.read(constant(g, int32_t(2))), std::vector<int64_t>{2});
       },
       {random_input({2}, 0.5, 1.5, 41, true)}});
  c.push_back({"TensorArrayReadV3",
               [=](graph& g, auto& x) {
                 tensor_array ta(g, dtype::f64, size3(g), options());
                 return reshape(ta.unstack(x[0]).read(constant(g, int32_t(1))),
                                std::vector<int64_t>{2});
               },
               {a}});
  c.push_back({"TensorArrayScatterV3",
               [=](graph& g, auto& x) {
                 tensor_array ta(g, dtype::f64, size3(g), options());
                 auto all = ta.scatter(i32(g, {2, 0, 1}), x[0]).stack();
                 return reshape(all, std::vector<int64_t>{3, 2});
               },
               {a}});
  c.push_back({"TensorArrayGatherV3",
               [=](graph& g, auto& x) {
                 tensor_array ta(g, dtype::f64, size3(g), options());
                 auto some = ta.unstack(x[0]).gather(i32(g, {1, 2}));
                 return reshape(some, std::vector<int64_t>{2, 2});
               },
               {a}});
  c.push_back({"TensorArraySplitV3",
               [](graph& g, auto& x) {
                 tensor_array ta(g, dtype::f64, constant(g, int32_t(2)));
                 auto parts = ta.split(x[0], constant(g, tensor::vector<int64_t>({1, 2})));
                 return reshape(parts.concat(), std::vector<int64_t>{3, 2}) * 1.5;
               },
               {a}});
  c.push_back(
      {"TensorArrayConcatV3",
       [](graph& g, auto& x) {
         tensor_array ta(g, dtype::f64, constant(g, int32_t(2)));
         auto w =
             ta.write(constant(g, int32_t(0)), x[0]).write(constant(g, int32_t(1)), x[1] * x[1]);
         return reshape(w.concat(), std::vector<int64_t>{3, 2});
       },
       {random_input({1, 2}, 0.5, 1.5, 42, true), random_input({2, 2}, 0.5, 1.5, 43)}});
}

} // namespace

std::vector<gradient_case> gradient_cases() {
  cases c;
  unary(c);
  binary(c);
  matmul_and_linalg(c);
  reductions(c);
  shapes(c);
  indexing(c);
  nn(c);
  conv(c);
  lstm(c);
  tensor_arrays(c);
  return c;
}

} // namespace runnel::testing
