// Builder functions of the array, reduction, nn and random families (builder.cpp: constants,
// variables and element-wise math).
#include "runnel/ops/graph/builder.hpp"

#include "runnel/ops/graph/builder_util.hpp"

namespace runnel {

using namespace builder_util;

output matmul(output a, output b, matmul_attrs attrs, std::string_view name) {
  return one(same_graph(a, b), "MatMul", name, {a.ep(), b.ep()},
             {{"transpose_a", attrs.transpose_a}, {"transpose_b", attrs.transpose_b}});
}

output sum(output x, std::vector<int64_t> axes, bool keep_dims, std::string_view name) {
  return reduction("Sum", x, std::move(axes), keep_dims, name);
}
output mean(output x, std::vector<int64_t> axes, bool keep_dims, std::string_view name) {
  return reduction("Mean", x, std::move(axes), keep_dims, name);
}
output reduce_max(output x, std::vector<int64_t> axes, bool keep_dims, std::string_view name) {
  return reduction("Max", x, std::move(axes), keep_dims, name);
}
output reduce_min(output x, std::vector<int64_t> axes, bool keep_dims, std::string_view name) {
  return reduction("Min", x, std::move(axes), keep_dims, name);
}
output reduce_prod(output x, std::vector<int64_t> axes, bool keep_dims, std::string_view name) {
  return reduction("Prod", x, std::move(axes), keep_dims, name);
}
output reduce_all(output x, std::vector<int64_t> axes, bool keep_dims, std::string_view name) {
  return reduction("All", x, std::move(axes), keep_dims, name);
}
output reduce_any(output x, std::vector<int64_t> axes, bool keep_dims, std::string_view name) {
  return reduction("Any", x, std::move(axes), keep_dims, name);
}
output argmin(output x, int64_t axis, dtype output_type, std::string_view name) {
  auto a = constant(x.owner(), tensor::scalar<int32_t>(int32_t(axis)), "dimension");
  return one(x.owner(), "ArgMin", name, {x.ep(), a.ep()}, {{"output_type", output_type}});
}

output argmax(output x, int64_t axis, dtype output_type, std::string_view name) {
  auto a = constant(x.owner(), tensor::scalar<int32_t>(int32_t(axis)), "dimension");
  return one(x.owner(), "ArgMax", name, {x.ep(), a.ep()}, {{"output_type", output_type}});
}

output identity(output x, std::string_view name) {
  return unary("Identity", x, name);
}
output size(output x, dtype out_type, std::string_view name) {
  return one(x.owner(), "Size", name, {x.ep()}, {{"out_type", out_type}});
}
output rank(output x, std::string_view name) {
  return unary("Rank", x, name);
}
output slice(output x, std::vector<int64_t> begin, std::vector<int64_t> size,
             std::string_view name) {
  graph& g = x.owner();
  return slice(x, int_vector(g, begin, "begin"), int_vector(g, size, "size"), name);
}
output slice(output x, output begin, output size, std::string_view name) {
  return one(x.owner(), "Slice", name, {x.ep(), begin.ep(), size.ep()});
}
output expand_dims(output x, int64_t axis, std::string_view name) {
  auto a = constant(x.owner(), tensor::scalar<int32_t>(int32_t(axis)), "dim");
  return one(x.owner(), "ExpandDims", name, {x.ep(), a.ep()});
}
output unsorted_segment_sum(output data, output segment_ids, output num_segments,
                            std::string_view name) {
  return one(data.owner(), "UnsortedSegmentSum", name,
             {data.ep(), segment_ids.ep(), num_segments.ep()});
}
output sum(output x, output axes, bool keep_dims, std::string_view name) {
  return one(x.owner(), "Sum", name, {x.ep(), axes.ep()}, {{"keep_dims", keep_dims}});
}
output shape_of(output x, dtype out_type, std::string_view name) {
  return one(x.owner(), "Shape", name, {x.ep()}, {{"out_type", out_type}});
}
output reshape(output x, std::vector<int64_t> new_shape, std::string_view name) {
  return reshape(x, int_vector(x.owner(), new_shape, "shape"), name);
}
output reshape(output x, output new_shape, std::string_view name) {
  return binary("Reshape", x, new_shape, name);
}
output transpose(output x, std::vector<int64_t> perm, std::string_view name) {
  if (perm.empty()) {
    if (!x.shape().has_known_rank())
      throw error(
          invalid_argument("transpose of '" + x.name() + "' without perm needs a known rank"));
    for (int i = x.shape().rank() - 1; i >= 0; --i)
      perm.push_back(i);
  }
  return binary("Transpose", x, int_vector(x.owner(), perm, "perm"), name);
}
output concat(const std::vector<output>& values, int64_t axis, std::string_view name) {
  if (values.empty())
    throw error(invalid_argument("concat needs at least one value"));
  graph& g = values[0].owner();
  std::vector<endpoint> in;
  for (auto& v : values)
    in.push_back(v.ep());
  in.push_back(constant(g, tensor::scalar<int32_t>(int32_t(axis)), "axis").ep());
  return one(g, "ConcatV2", name, in, {{"N", int64_t(values.size())}});
}
output fill(output dims, output value, std::string_view name) {
  return binary("Fill", dims, value, name);
}
output zeros_like(output x, std::string_view name) {
  return unary("ZerosLike", x, name);
}
output ones_like(output x, std::string_view name) {
  return unary("OnesLike", x, name);
}
output gather(output params, output indices, int64_t axis, std::string_view name) {
  graph& g = same_graph(params, indices);
  auto a = constant(g, tensor::scalar<int32_t>(int32_t(axis)), "axis");
  return one(g, "GatherV2", name, {params.ep(), indices.ep(), a.ep()});
}
output one_hot(output indices, int64_t depth, double on_value, double off_value, dtype t,
               int64_t axis, std::string_view name) {
  graph& g = indices.owner();
  auto d = constant(g, tensor::scalar<int32_t>(int32_t(depth)), "depth");
  auto on = filled(g, t, shape{}, on_value, "on_value");
  auto off = filled(g, t, shape{}, off_value, "off_value");
  return one(g, "OneHot", name, {indices.ep(), d.ep(), on.ep(), off.ep()}, {{"axis", axis}});
}
output print(output x, std::string message, std::string_view name) {
  return one(x.owner(), "Print", name, {x.ep()}, {{"message", std::move(message)}});
}
operation assert_that(output condition, const std::vector<output>& data, int64_t summarize,
                      std::string_view name) {
  graph& g = condition.owner();
  std::vector<endpoint> in{condition.ep()};
  std::vector<dtype> types;
  for (auto& d : data) {
    same_graph(condition, d);
    in.push_back(d.ep());
    types.push_back(d.type());
  }
  auto id = g.add_op("Assert", name.empty() ? "Assert" : name, in,
                     {{"T", types}, {"summarize", summarize}});
  if (!id)
    throw error(id.error());
  return operation(&g, *id);
}

output stack(const std::vector<output>& values, int64_t axis, std::string_view name) {
  if (values.empty())
    throw error(invalid_argument("stack needs at least one value"));
  std::vector<endpoint> in;
  for (auto& v : values)
    in.push_back(v.ep());
  return one(values[0].owner(), "Pack", name, in, {{"N", int64_t(values.size())}, {"axis", axis}});
}
std::vector<output> unstack(output x, int64_t num, int64_t axis, std::string_view name) {
  return x.owner().build("Unpack", name.empty() ? "Unpack" : name, {x.ep()},
                         {{"num", num}, {"axis", axis}});
}
std::vector<output> split(output x, int64_t num, int64_t axis, std::string_view name) {
  graph& g = x.owner();
  auto a = constant(g, tensor::scalar<int32_t>(int32_t(axis)), "split_dim");
  return g.build("Split", name.empty() ? "Split" : name, {a.ep(), x.ep()}, {{"num_split", num}});
}
output squeeze(output x, std::vector<int64_t> axes, std::string_view name) {
  return one(x.owner(), "Squeeze", name, {x.ep()}, {{"squeeze_dims", axes}});
}
output tile(output x, std::vector<int64_t> multiples, std::string_view name) {
  return binary("Tile", x, int_vector(x.owner(), multiples, "multiples"), name);
}
output pad(output x, std::vector<std::pair<int64_t, int64_t>> paddings, std::string_view name) {
  std::vector<int32_t> flat;
  for (auto [b, a] : paddings) {
    flat.push_back(int32_t(b));
    flat.push_back(int32_t(a));
  }
  auto p = constant(x.owner(), tensor::from_values<int32_t>({int64_t(paddings.size()), 2}, flat),
                    "paddings");
  return binary("Pad", x, p, name);
}
output reverse(output x, std::vector<int64_t> axes, std::string_view name) {
  return binary("ReverseV2", x, int_vector(x.owner(), axes, "axis"), name);
}
output strided_slice(output x, std::vector<int64_t> begin, std::vector<int64_t> end,
                     std::vector<int64_t> strides, int64_t begin_mask, int64_t end_mask,
                     int64_t ellipsis_mask, int64_t new_axis_mask, int64_t shrink_axis_mask,
                     std::string_view name) {
  graph& g = x.owner();
  auto b = int_vector(g, begin, "begin");
  auto e = int_vector(g, end, "end");
  auto s = int_vector(g, strides, "strides");
  return one(g, "StridedSlice", name, {x.ep(), b.ep(), e.ep(), s.ep()},
             {{"begin_mask", begin_mask},
              {"end_mask", end_mask},
              {"ellipsis_mask", ellipsis_mask},
              {"new_axis_mask", new_axis_mask},
              {"shrink_axis_mask", shrink_axis_mask}});
}

output range(graph& g, output start, output limit, output delta, std::string_view name) {
  return one(g, "Range", name, {start.ep(), limit.ep(), delta.ep()});
}
output random_shuffle(output x, int64_t seed, std::string_view name) {
  auto [s1, s2] = seeds(x.owner(), seed);
  return one(x.owner(), "RandomShuffle", name, {x.ep()}, {{"seed", s1}, {"seed2", s2}});
}
output batch_matmul(output x, output y, bool adj_x, bool adj_y, std::string_view name) {
  return one(same_graph(x, y), "BatchMatMul", name, {x.ep(), y.ep()},
             {{"adj_x", adj_x}, {"adj_y", adj_y}});
}
output matrix_inverse(output x, bool adjoint, std::string_view name) {
  return one(x.owner(), "MatrixInverse", name, {x.ep()}, {{"adjoint", adjoint}});
}
output matrix_determinant(output x, std::string_view name) {
  return unary("MatrixDeterminant", x, name);
}
output log_softmax(output logits, std::string_view name) {
  return unary("LogSoftmax", logits, name);
}
output l2_loss(output t, std::string_view name) {
  return unary("L2Loss", t, name);
}
output in_top_k(output predictions, output targets, int64_t k, std::string_view name) {
  return one(same_graph(predictions, targets), "InTopK", name, {predictions.ep(), targets.ep()},
             {{"k", k}});
}

output bias_add(output value, output bias, std::string_view name) {
  return binary("BiasAdd", value, bias, name);
}
output softmax(output logits, std::string_view name) {
  return unary("Softmax", logits, name);
}
std::pair<output, output> softmax_cross_entropy_with_logits(output logits, output labels,
                                                            std::string_view name) {
  auto outs = same_graph(logits, labels)
                  .build("SoftmaxCrossEntropyWithLogits", name, {logits.ep(), labels.ep()});
  return {outs[0], outs[1]};
}
std::pair<output, output> sparse_softmax_cross_entropy_with_logits(output logits, output labels,
                                                                   std::string_view name) {
  auto outs = same_graph(logits, labels)
                  .build("SparseSoftmaxCrossEntropyWithLogits", name, {logits.ep(), labels.ep()});
  return {outs[0], outs[1]};
}

std::pair<output, output> top_k(output x, output k, std::string_view name) {
  auto outs = same_graph(x, k).build("TopKV2", name, {x.ep(), k.ep()});
  return {outs[0], outs[1]};
}

namespace {
std::vector<int64_t> nhwc(const std::vector<int64_t>& hw, const char* what) {
  if (hw.size() != 2)
    throw error(invalid_argument(std::string(what) + " needs 2 values (height, width), got " +
                                 std::to_string(hw.size())));
  return {1, hw[0], hw[1], 1};
}
} // namespace

output conv2d(output input, output filter, std::vector<int64_t> strides, const std::string& padding,
              std::string_view name) {
  return one(same_graph(input, filter), "Conv2D", name, {input.ep(), filter.ep()},
             {{"strides", nhwc(strides, "strides")}, {"padding", padding}});
}
output max_pool(output input, std::vector<int64_t> window, std::vector<int64_t> strides,
                const std::string& padding, std::string_view name) {
  return one(input.owner(), "MaxPool", name, {input.ep()},
             {{"ksize", nhwc(window, "window")},
              {"strides", nhwc(strides, "strides")},
              {"padding", padding}});
}
output avg_pool(output input, std::vector<int64_t> window, std::vector<int64_t> strides,
                const std::string& padding, std::string_view name) {
  return one(input.owner(), "AvgPool", name, {input.ep()},
             {{"ksize", nhwc(window, "window")},
              {"strides", nhwc(strides, "strides")},
              {"padding", padding}});
}

std::pair<int64_t, int64_t> seeds(graph& g, int64_t op_seed) {
  if (g.seed())
    return {*g.seed(), op_seed ? op_seed : g.num_nodes() + 1};
  if (op_seed)
    return {default_graph_seed, op_seed};
  return {0, 0};
}

output random_uniform(graph& g, const shape& s, dtype t, int64_t seed, std::string_view name) {
  return random_op("RandomUniform", g, s, t, seed, name);
}
output random_normal(graph& g, const shape& s, double stddev, dtype t, int64_t seed,
                     std::string_view name) {
  auto z = random_op("RandomStandardNormal", g, s, t, seed, name);
  return stddev == 1.0 ? z : z * stddev;
}
output multinomial(output logits, int64_t num_samples, int64_t seed, dtype out,
                   std::string_view name) {
  graph& g = logits.owner();
  auto [s1, s2] = seeds(g, seed);
  auto scope = g.name_scope(name.empty() ? "Multinomial" : name);
  auto n = constant(g, tensor::scalar<int32_t>(int32_t(num_samples)), "num_samples");
  return one(g, "Multinomial", "Multinomial", {logits.ep(), n.ep()},
             {{"output_dtype", out}, {"seed", s1}, {"seed2", s2}});
}
output truncated_normal(graph& g, const shape& s, double stddev, dtype t, int64_t seed,
                        std::string_view name) {
  auto z = random_op("TruncatedNormal", g, s, t, seed, name);
  return stddev == 1.0 ? z : z * stddev;
}

} // namespace runnel
