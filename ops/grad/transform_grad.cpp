// Gradient functions of the transform ops: packing, splitting, strided slices, reversing, padding
// and tiling.
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(transform) {
  reg.add_non_differentiable("Range");
  using grads = std::vector<output>;
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
    auto a = same_attrs(
        c.n, {"begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"});
    auto index_type = get_attr<dtype>(c.n.attrs, "Index");
    auto dx = c.g.build("StridedSliceGrad", "StridedSliceGrad",
                        {shape_of(c.input(0), index_type).ep(), c.input(1).ep(), c.input(2).ep(),
                         c.input(3).ep(), c.grad().ep()},
                        a)[0];
    return grads{dx, output(), output(), output()};
  });
  reg.add_non_differentiable("StridedSliceGrad");
  reg.add("Squeeze",
          [](const gradient_context& c) { return grads{reshape(c.grad(), shape_of(c.input(0)))}; });
  reg.add("ReverseV2", [](const gradient_context& c) {
    return grads{c.g.build("ReverseV2", "ReverseV2", {c.grad().ep(), c.input(1).ep()})[0],
                 output()};
  });
  reg.add("ReverseSequence", [](const gradient_context& c) {
    // Its own inverse: the gradient reversed the same way.
    return grads{c.g.build("ReverseSequence", "ReverseSequence", {c.grad().ep(), c.input(1).ep()},
                           {{"seq_dim", get_attr<int64_t>(c.n.attrs, "seq_dim")},
                            {"batch_dim", get_attr<int64_t>(c.n.attrs, "batch_dim")}})[0],
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

} // namespace runnel
