// Gradient functions of the math and array ops.
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/embedding.hpp"

namespace runnel {
namespace {

using grads = std::vector<output>;

/// The keep_dims shape of a reduction of `x` over `axes` (a tensor of axes).
output kept_shape(output x, output axes) {
  return x.owner().build("ReducedShape", "ReducedShape",
                         {shape_of(x).ep(), cast(axes, dtype::i32).ep()})[0];
}

/// Broadcasts a reduction's gradient back to the input: reshape to keep_dims, then expand.
output unreduce(output grad, output x, output axes) {
  auto kept = reshape(grad, kept_shape(x, axes));
  return kept * ones_like(x);
}

/// Ops with no gradient: shapes, comparisons, indices, random numbers, sources.
void register_non_differentiable(gradient_registry& reg) {
  for (auto op : {"Shape",
                  "Size",
                  "Rank",
                  "Greater",
                  "Less",
                  "GreaterEqual",
                  "LessEqual",
                  "Equal",
                  "NotEqual",
                  "ArgMax",
                  "OneHot",
                  "ZerosLike",
                  "OnesLike",
                  "Sign",
                  "FloorDiv",
                  "Floor", // piecewise constant: TensorFlow gives it no gradient
                  "BroadcastGradientArgs",
                  "ReducedShape",
                  "LogicalAnd",
                  "LogicalOr",
                  "LogicalNot",
                  "RandomUniform",
                  "RandomStandardNormal",
                  "TruncatedNormal",
                  "Const",
                  "Placeholder",
                  "VariableV2"})
    reg.add_non_differentiable(op);
}

/// Element-wise ops: arithmetic, the unary table's rows, casts and selects.
void register_elementwise_gradients(gradient_registry& reg) {
  reg.add("Identity", [](const gradient_context& c) { return grads{c.grad()}; });
  reg.add("Print", [](const gradient_context& c) { return grads{c.grad()}; });
  reg.add("Add", [](const gradient_context& c) {
    return grads{sum_to_shape_of(c.grad(), c.input(0)), sum_to_shape_of(c.grad(), c.input(1))};
  });
  reg.add("Sub", [](const gradient_context& c) {
    return grads{sum_to_shape_of(c.grad(), c.input(0)), sum_to_shape_of(-c.grad(), c.input(1))};
  });
  reg.add("Mul", [](const gradient_context& c) {
    auto a = c.input(0), b = c.input(1);
    return grads{sum_to_shape_of(c.grad() * b, a), sum_to_shape_of(a * c.grad(), b)};
  });
  reg.add("Div", [](const gradient_context& c) {
    auto a = c.input(0), b = c.input(1), g = c.grad();
    return grads{sum_to_shape_of(g / b, a), sum_to_shape_of(-g * a / (b * b), b)};
  });
  reg.add("FloorMod", [](const gradient_context& c) {
    auto a = c.input(0), b = c.input(1), g = c.grad();
    return grads{sum_to_shape_of(g, a), sum_to_shape_of(-g * floor_div(a, b), b)};
  });
  reg.add("Pow", [](const gradient_context& c) {
    auto x = c.input(0), y = c.input(1), z = c.out(0), g = c.grad();
    auto gx = g * y * pow(x, y - 1.0);
    // d/dy x^y = x^y log x, taken as 0 where x <= 0 (as TensorFlow does).
    auto positive = greater(x, zeros_like(x));
    auto safe_log = log(select(positive, x, ones_like(x)));
    auto gy = g * z * select(positive, safe_log, zeros_like(x));
    return grads{sum_to_shape_of(gx, x), sum_to_shape_of(gy, y)};
  });
  auto minmax = [](bool is_max) {
    return [is_max](const gradient_context& c) {
      auto a = c.input(0), b = c.input(1), g = c.grad();
      auto pick_a = is_max ? greater_equal(a, b) : less_equal(a, b);
      auto ga = select(pick_a, g, zeros_like(g));
      auto gb = select(pick_a, zeros_like(g), g);
      return grads{sum_to_shape_of(ga, a), sum_to_shape_of(gb, b)};
    };
  };
  reg.add("Maximum", minmax(true));
  reg.add("Minimum", minmax(false));
  reg.add("SquaredDifference", [](const gradient_context& c) {
    auto a = c.input(0), b = c.input(1);
    auto d = c.grad() * (a - b) * 2.0;
    return grads{sum_to_shape_of(d, a), sum_to_shape_of(-d, b)};
  });
  reg.add("Atan2", [](const gradient_context& c) { // d/dy = x / (x² + y²), d/dx = -y / (x² + y²)
    auto y = c.input(0), x = c.input(1);
    auto g = c.grad() / (x * x + y * y);
    return grads{sum_to_shape_of(g * x, y), sum_to_shape_of(-g * y, x)};
  });
  reg.add("Neg", [](const gradient_context& c) { return grads{-c.grad()}; });
  reg.add("Exp", [](const gradient_context& c) { return grads{c.grad() * c.out(0)}; });
  reg.add("Log",
          [](const gradient_context& c) { return grads{c.grad() * reciprocal(c.input(0))}; });
  reg.add("Log1p",
          [](const gradient_context& c) { return grads{c.grad() * reciprocal(c.input(0) + 1.0)}; });
  reg.add("Square", [](const gradient_context& c) { return grads{c.grad() * (c.input(0) * 2.0)}; });
  auto y_dy = [](const char* op) {
    return [op](const gradient_context& c) {
      return grads{c.g.build(op, op, {c.out(0).ep(), c.grad().ep()})[0]};
    };
  };
  // The unary rows whose functor gives its gradient (ops/core/unary_ops.hpp): one _UnaryGrad.
  for (auto& u : unary_ops)
    if (u.has_grad)
      reg.add(u.name, [op = std::string(u.name)](const gradient_context& c) {
        return grads{c.g.build("_UnaryGrad", op + "Grad",
                               {c.input(0).ep(), c.out(0).ep(), c.grad().ep()}, {{"op", op}})[0]};
      });
  reg.add("Sqrt", y_dy("SqrtGrad"));
  reg.add("Rsqrt", y_dy("RsqrtGrad"));
  reg.add("Reciprocal", y_dy("ReciprocalGrad"));
  reg.add("Tanh", y_dy("TanhGrad"));
  reg.add("Sigmoid", y_dy("SigmoidGrad"));
  reg.add("Abs", [](const gradient_context& c) { return grads{c.grad() * sign(c.input(0))}; });
  reg.add("Sin", [](const gradient_context& c) { return grads{c.grad() * cos(c.input(0))}; });
  reg.add("Cos", [](const gradient_context& c) { return grads{-c.grad() * sin(c.input(0))}; });
  reg.add("Cast", [](const gradient_context& c) {
    dtype src = c.input(0).type();
    if (!is_floating(src) || !is_floating(c.grad().type()))
      return grads{output()};
    return grads{cast(c.grad(), src)};
  });
  reg.add("AddN", [](const gradient_context& c) { return grads(c.inputs.size(), c.grad()); });
  reg.add("Select", [](const gradient_context& c) {
    auto g = c.grad();
    auto z = zeros_like(g);
    return grads{output(), select(c.input(0), g, z), select(c.input(0), z, g)};
  });
}

/// MatMul and the reductions.
void register_reduction_gradients(gradient_registry& reg) {
  reg.add("MatMul", [](const gradient_context& c) {
    bool ta = get_attr<bool>(c.n.attrs, "transpose_a");
    bool tb = get_attr<bool>(c.n.attrs, "transpose_b");
    auto a = c.input(0), b = c.input(1), g = c.grad();
    if (!ta && !tb)
      return grads{matmul(g, b, {false, true}), matmul(a, g, {true, false})};
    if (!ta && tb)
      return grads{matmul(g, b), matmul(g, a, {true, false})};
    if (ta && !tb)
      return grads{matmul(b, g, {false, true}), matmul(a, g)};
    return grads{matmul(b, g, {true, true}), matmul(g, a, {true, true})};
  });
  reg.add("Sum", [](const gradient_context& c) {
    return grads{unreduce(c.grad(), c.input(0), c.input(1)), output()};
  });
  reg.add("Mean", [](const gradient_context& c) {
    auto x = c.input(0);
    auto count = cast(size(x), x.type()) / cast(size(c.out(0)), x.type());
    return grads{unreduce(c.grad(), x, c.input(1)) / count, output()};
  });
  for (auto op : {"ArgMin", "All", "Any"})
    reg.add_non_differentiable(op);
  reg.add("Prod", [](const gradient_context& c) {
    // d prod / d x_i = product of the other elements of x_i's group. Without zeros that is
    // prod / x_i; with one zero, only the zero element has a gradient (the product of the
    // non-zeros); with two or more, every gradient is zero.
    auto x = c.input(0), axes = c.input(1);
    auto kept = kept_shape(x, axes);
    auto is_zero = equal(x, zeros_like(x));
    auto zeros_in_group = reshape(sum(cast(is_zero, x.type()), axes, false), kept) * ones_like(x);
    auto nonzero_prod =
        c.g.build("Prod", "Prod", {select(is_zero, ones_like(x), x).ep(), axes.ep()},
                  {{"keep_dims", true}})[0] *
        ones_like(x);
    auto g = reshape(c.grad(), kept) * ones_like(x);
    auto safe_x = select(is_zero, ones_like(x), x);
    auto none_zero = g * nonzero_prod / safe_x;
    auto one_zero = select(is_zero, g * nonzero_prod, zeros_like(x));
    auto zero = zeros_like(x);
    auto count0 = equal(zeros_in_group, zeros_like(x));
    auto count1 = equal(zeros_in_group, ones_like(x));
    return grads{select(count0, none_zero, select(count1, one_zero, zero)), output()};
  });
  // Min and Max: the gradient goes to the elements equal to the result, split among ties.
  auto extremum = [](const gradient_context& c) {
    auto x = c.input(0), axes = c.input(1);
    auto kept = kept_shape(x, axes);
    auto y = reshape(c.out(0), kept);
    auto indicators = cast(equal(x, y * ones_like(x)), x.type());
    auto count = reshape(sum(indicators, axes, false), kept);
    return grads{indicators / count * reshape(c.grad(), kept), output()};
  };
  reg.add("Min", extremum);
  reg.add("Max", extremum);
}

/// Ops that move elements: reshapes, transposes, concatenation, gathers.
void register_reshaping_gradients(gradient_registry& reg) {
  reg.add("Reshape", [](const gradient_context& c) {
    return grads{reshape(c.grad(), shape_of(c.input(0))), output()};
  });
  reg.add("ExpandDims", [](const gradient_context& c) {
    return grads{reshape(c.grad(), shape_of(c.input(0))), output()};
  });
  reg.add("Transpose", [](const gradient_context& c) {
    auto& perm_node = c.input(1).node();
    if (perm_node.op != "Const")
      throw error(
          unimplemented("gradient of Transpose '" + c.n.name + "' needs a constant permutation"));
    auto perm = to_int64_vector(get_attr<tensor>(perm_node.attrs, "value")).value();
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
      inverse[size_t(perm[i])] = int64_t(i);
    return grads{transpose(c.grad(), inverse), output()};
  });
  reg.add("ConcatV2", [](const gradient_context& c) {
    int n = int(c.inputs.size()) - 1;
    auto& axis_node = c.input(n).node();
    int rank = c.out(0).shape().rank();
    if (axis_node.op != "Const" || rank < 0)
      throw error(unimplemented("gradient of ConcatV2 '" + c.n.name +
                                "' needs a constant axis and known rank"));
    int64_t axis = to_int64_vector(get_attr<tensor>(axis_node.attrs, "value")).value()[0];
    if (axis < 0)
      axis += rank;
    grads out;
    bool known = true;
    for (int i = 0; i < n; ++i)
      known &= c.input(i).shape().rank() > axis && c.input(i).shape()[int(axis)] >= 0;
    if (!known) {
      // Lengths along the axis known only when the step runs: slice with computed bounds
      // (begin = the offset on the axis, size = the input's length there and -1 elsewhere).
      std::vector<int32_t> hot(size_t(rank), 0);
      hot[size_t(axis)] = 1;
      auto onehot = constant(c.g, tensor::vector<int32_t>(hot));
      auto minus =
          onehot - constant(c.g, tensor::vector<int32_t>(std::vector<int32_t>(size_t(rank), 1)));
      output offset = constant(c.g, int32_t(0));
      for (int i = 0; i < n; ++i) {
        auto len = sum(shape_of(c.input(i)) * onehot);
        out.push_back(slice(c.grad(), onehot * offset, onehot * len + minus));
        offset = offset + len;
      }
      out.push_back(output());
      return out;
    }
    int64_t offset = 0;
    for (int i = 0; i < n; ++i) {
      int64_t len = c.input(i).shape()[int(axis)];
      std::vector<int64_t> begin(size_t(rank), 0), size(size_t(rank), -1);
      begin[size_t(axis)] = offset;
      size[size_t(axis)] = len;
      out.push_back(slice(c.grad(), begin, size));
      offset += len;
    }
    out.push_back(output());
    return out;
  });
  // Along axis 0 (an embedding lookup) the gradient is indexed slices: the gradient rows and the
  // ids they belong to, so a table's gradient costs only the rows looked up. Along another axis
  // it is dense.
  reg.add_sparse("GatherV2", [](const gradient_context& c) -> std::vector<gradient_value> {
    auto& axis_node = c.input(2).node();
    if (axis_node.op != "Const")
      throw error(unimplemented("gradient of GatherV2 '" + c.n.name + "' needs a constant axis"));
    int64_t axis = to_int64_vector(get_attr<tensor>(axis_node.attrs, "value")).value()[0];
    auto params = c.input(0), indices = c.input(1);
    const shape& ps = params.shape();
    int rank = ps.rank();
    if (axis < 0)
      axis += rank;
    if (axis == 0) {
      output dense_shape = ps.is_fully_defined()
                               ? constant(c.g, tensor::vector<int64_t>(ps.dims()), "dense_shape")
                               : shape_of(params, dtype::i64, "dense_shape");
      output values = c.grad(), ids = indices;
      if (indices.shape().rank() != 1) { // [ids..., row] -> [n, row]
        ids = reshape(indices, std::vector<int64_t>{-1}, "ids");
        bool rows_known = rank >= 1;
        for (int d = 1; rows_known && d < rank; ++d)
          rows_known = ps[d] >= 0;
        if (rows_known) {
          std::vector<int64_t> dims{-1};
          dims.insert(dims.end(), ps.dims().begin() + 1, ps.dims().end());
          values = reshape(values, dims, "values");
        } else {
          auto row = slice(shape_of(params), std::vector<int64_t>{1}, std::vector<int64_t>{-1});
          values = reshape(values, concat({constant(c.g, {int32_t(-1)}), row}, 0), "values");
        }
      }
      return {indexed_slices{values, ids, dense_shape}, output(), output()};
    }
    // Another axis: move it to the front, sum, and move it back (1-D indices, known rank).
    if (rank < 0 || indices.shape().rank() != 1)
      throw error(unimplemented("gradient of GatherV2 '" + c.n.name + "' along axis " +
                                std::to_string(axis) + " needs a known rank and 1-D indices"));
    auto rows =
        reshape(slice(shape_of(params), std::vector<int64_t>{axis}, std::vector<int64_t>{1}),
                std::vector<int64_t>{});
    std::vector<int64_t> perm{axis}, inverse(size_t(rank), 0);
    for (int d = 0; d < rank; ++d)
      if (d != axis)
        perm.push_back(d);
    for (int d = 0; d < rank; ++d)
      inverse[size_t(perm[size_t(d)])] = d;
    auto summed = unsorted_segment_sum(transpose(c.grad(), perm), indices, rows);
    return {transpose(summed, inverse), output(), output()};
  });
}

/// Fill, packing, splitting, slicing, padding and tiling.
void register_array_gradients(gradient_registry& reg) {
  reg.add("Fill", [](const gradient_context& c) { return grads{output(), sum(c.grad())}; });
  for (auto op : {"Range", "RandomShuffle"})
    reg.add_non_differentiable(op);
  reg.add("Pack", [](const gradient_context& c) {
    auto axis = get_attr<int64_t>(c.n.attrs, "axis");
    return unstack(c.grad(), int64_t(c.inputs.size()), axis);
  });
  reg.add("Unpack", [](const gradient_context& c) {
    grads parts;
    for (size_t i = 0; i < c.outputs.size(); ++i)
      parts.push_back(c.grad(int(i)));
    return grads{stack(parts, get_attr<int64_t>(c.n.attrs, "axis"))};
  });
  reg.add("Split", [](const gradient_context& c) {
    grads parts;
    for (size_t i = 0; i < c.outputs.size(); ++i)
      parts.push_back(c.grad(int(i)));
    auto& axis_node = c.input(0).node();
    if (axis_node.op != "Const")
      throw error(unimplemented("gradient of Split '" + c.n.name + "' needs a constant axis"));
    int64_t axis = to_int64_vector(get_attr<tensor>(axis_node.attrs, "value")).value()[0];
    return grads{output(), concat(parts, axis)};
  });
  reg.add("StridedSlice", [](const gradient_context& c) {
    attr_map a;
    for (auto k : {"begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"})
      a[k] = c.n.attrs.at(k);
    auto index_type = get_attr<dtype>(c.n.attrs, "Index");
    auto dx = c.g.build("StridedSliceGrad", "StridedSliceGrad",
                        {shape_of(c.input(0), index_type).ep(), c.input(1).ep(), c.input(2).ep(),
                         c.input(3).ep(), c.grad().ep()},
                        a)[0];
    return grads{dx, output(), output(), output()};
  });
  reg.add_non_differentiable("StridedSliceGrad");
  reg.add("Slice", [](const gradient_context& c) {
    // Pad the gradient back to the input's shape: before = begin, after = rest.
    auto x = c.input(0);
    auto begin = cast(c.input(1), dtype::i32);
    auto after = shape_of(x) - begin - shape_of(c.out(0));
    return grads{c.g.build("Pad", "Pad", {c.grad().ep(), stack({begin, after}, 1).ep()})[0],
                 output(), output()};
  });
  reg.add("Squeeze",
          [](const gradient_context& c) { return grads{reshape(c.grad(), shape_of(c.input(0)))}; });
  reg.add("ReverseV2", [](const gradient_context& c) {
    return grads{c.g.build("ReverseV2", "ReverseV2", {c.grad().ep(), c.input(1).ep()})[0],
                 output()};
  });
  reg.add("Pad", [](const gradient_context& c) {
    auto& p = c.input(1).node();
    if (p.op != "Const")
      throw error(unimplemented("gradient of Pad '" + c.n.name + "' needs constant paddings"));
    auto t = get_attr<tensor>(p.attrs, "value");
    auto flat = to_int64_vector(t.reshaped({t.num_elements()}).value()).value();
    std::vector<int64_t> begin;
    for (size_t i = 0; i < flat.size(); i += 2)
      begin.push_back(flat[i]);
    auto b = constant(
        c.g, tensor::vector<int32_t>(std::vector<int32_t>(begin.begin(), begin.end())), "begin");
    return grads{slice(c.grad(), b, shape_of(c.input(0))), output()};
  });
  reg.add("Tile", [](const gradient_context& c) {
    shape xs = c.input(0).shape();
    auto& m = c.input(1).node();
    if (m.op != "Const" || !xs.is_fully_defined())
      throw error(unimplemented("gradient of Tile '" + c.n.name +
                                "' needs constant multiples and a fully known input shape"));
    auto mult = to_int64_vector(get_attr<tensor>(m.attrs, "value")).value();
    // View the gradient as [m0, d0, m1, d1, ...] and sum over the m axes.
    std::vector<int64_t> split_dims, axes;
    for (int d = 0; d < xs.rank(); ++d) {
      split_dims.push_back(mult[size_t(d)]);
      split_dims.push_back(xs[d]);
      axes.push_back(2 * d);
    }
    return grads{reshape(sum(reshape(c.grad(), split_dims), axes), xs.dims()), output()};
  });
}

/// Batched matrix products, inverse, determinant, segment sums, stitch and partition.
void register_linalg_segment_gradients(gradient_registry& reg) {
  reg.add("BatchMatMul", [](const gradient_context& c) {
    bool ax = get_attr<bool>(c.n.attrs, "adj_x"), ay = get_attr<bool>(c.n.attrs, "adj_y");
    auto x = c.input(0), y = c.input(1), g = c.grad();
    if (!ax && !ay)
      return grads{batch_matmul(g, y, false, true), batch_matmul(x, g, true, false)};
    if (!ax && ay)
      return grads{batch_matmul(g, y), batch_matmul(g, x, true, false)};
    if (ax && !ay)
      return grads{batch_matmul(y, g, false, true), batch_matmul(x, g)};
    return grads{batch_matmul(y, g, true, true), batch_matmul(g, x, true, true)};
  });
  reg.add("MatrixInverse", [](const gradient_context& c) {
    // d inv(A) = -inv(A)ᵀ · g · inv(A)ᵀ
    auto inv = c.out(0);
    return grads{-batch_matmul(batch_matmul(inv, c.grad(), true, false), inv, false, true)};
  });
  reg.add("MatrixDeterminant", [](const gradient_context& c) {
    // d det(A) / dA = det(A) · inv(A)ᵀ
    auto a = c.input(0);
    auto scale = expand_dims(expand_dims(c.grad() * c.out(0), -1), -1);
    return grads{scale * matrix_inverse(a, true)};
  });
  reg.add("UnsortedSegmentSum", [](const gradient_context& c) {
    return grads{gather(c.grad(), c.input(1)), output(), output()};
  });
  reg.add("DynamicStitch", [](const gradient_context& c) {
    // data[i]'s gradient: the merged gradient's rows at indices[i].
    size_t n = c.inputs.size() / 2;
    grads out(n);
    for (size_t i = 0; i < n; ++i)
      out.push_back(gather(c.grad(), c.input(int(i))));
    return out;
  });
  reg.add("DynamicPartition", [](const gradient_context& c) {
    // Stitch the outputs' gradients back to where their rows came from.
    auto parts = c.input(1);
    auto n = get_attr<int64_t>(c.n.attrs, "num_partitions");
    auto positions =
        reshape(range(c.g, constant(c.g, int32_t(0)), size(parts), constant(c.g, int32_t(1))),
                shape_of(parts));
    auto where = dynamic_partition(positions, parts, n);
    std::vector<output> pieces;
    for (int64_t i = 0; i < n; ++i)
      pieces.push_back(c.grad(int(i)));
    return grads{reshape(dynamic_stitch(where, pieces), shape_of(c.input(0))), output()};
  });
  reg.add_non_differentiable("CheckIndices");
}

} // namespace

RUNNEL_GRADIENT_FAMILY(math) {
  register_non_differentiable(reg);
  register_elementwise_gradients(reg);
  register_reduction_gradients(reg);
  register_reshaping_gradients(reg);
  register_array_gradients(reg);
  register_linalg_segment_gradients(reg);
}

} // namespace runnel
