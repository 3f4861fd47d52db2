// Gradient functions of the array ops: identities, reshapes, transposes, concatenation, gathers and
// fills.
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

namespace {

/// IdentityN passes each output's gradient to the input of its index.
std::vector<output> identity_n_grad(const gradient_context& c) {
  std::vector<output> out;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    out.push_back(c.grad(int(i)));
  return out;
}

} // namespace

RUNNEL_GRADIENT_FAMILY(array) {
  for (auto op : {"Shape", "OneHot", "ZerosLike", "OnesLike", "Const", "Placeholder"})
    reg.add_non_differentiable(op);
  using grads = std::vector<output>;
  reg.add("Identity", [](const gradient_context& c) { return grads{c.grad()}; });
  reg.add("PlaceholderWithDefault", [](const gradient_context& c) { return grads{c.grad()}; });
  reg.add("Print", [](const gradient_context& c) { return grads{c.grad()}; });
  reg.add("IdentityN", identity_n_grad);
  reg.add("Reshape", [](const gradient_context& c) {
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
  reg.add("Fill", [](const gradient_context& c) { return grads{output(), sum(c.grad())}; });
}

} // namespace runnel
