// Gradient functions of the TensorArray ops: a read's gradient is a write to the gradient array
// (TensorArrayGradV3), a write's is a read from it, gather and scatter, concat and split likewise.
// The array and stack handles themselves have no gradient.
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/tensor_array.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(tensor_array) {
  for (auto op : {"TensorArrayV3", "TensorArrayGradV3", "TensorArraySizeV3", "TensorArrayCloseV3",
                  "StackV2", "StackPushV2", "StackPopV2", "StackCloseV2"})
    reg.add_non_differentiable(op);
  using grads = std::vector<output>;
  auto array = [](const gradient_context& c, output flow, const shape& element) {
    dtype t = c.n.op == "TensorArrayReadV3" || c.n.op == "TensorArrayGatherV3" ||
                      c.n.op == "TensorArrayConcatV3"
                  ? get_attr<dtype>(c.n.attrs, "dtype")
                  : get_attr<dtype>(c.n.attrs, "T");
    return tensor_array(c.input(0), flow, t, element).grad(c.source, flow);
  };
  auto rows = [](const shape& s) {
    if (!s.has_known_rank() || s.rank() == 0)
      return shape::unknown();
    return shape(std::vector<int64_t>(s.dims().begin() + 1, s.dims().end()));
  };
  reg.add("TensorArrayReadV3", [array](const gradient_context& c) {
    if (!c.grads[0].valid())
      return grads(3);
    auto g = array(c, c.input(2), c.outputs[0].shape()).write(c.input(1), c.grad());
    return grads{{}, {}, g.flow()};
  });
  reg.add("TensorArrayWriteV3", [array](const gradient_context& c) {
    if (!c.grads[0].valid())
      return grads(4);
    output flow = c.grads[0];
    auto value = array(c, flow, c.inputs[2].shape()).read(c.input(1));
    return grads{{}, {}, value, flow};
  });
  reg.add("TensorArrayGatherV3", [array, rows](const gradient_context& c) {
    if (!c.grads[0].valid())
      return grads(3);
    auto g = array(c, c.input(2), rows(c.outputs[0].shape())).scatter(c.input(1), c.grad());
    return grads{{}, {}, g.flow()};
  });
  reg.add("TensorArrayScatterV3", [array, rows](const gradient_context& c) {
    if (!c.grads[0].valid())
      return grads(4);
    output flow = c.grads[0];
    auto value = array(c, flow, rows(c.inputs[2].shape())).gather(c.input(1));
    return grads{{}, {}, value, flow};
  });
  reg.add("TensorArrayConcatV3", [array](const gradient_context& c) {
    if (!c.grads[0].valid())
      return grads(2);
    auto g = array(c, c.input(1), shape::unknown()).split(c.grad(), c.out(1));
    return grads{{}, g.flow()};
  });
  reg.add("TensorArraySplitV3", [array](const gradient_context& c) {
    if (!c.grads[0].valid())
      return grads(4);
    output flow = c.grads[0];
    auto value = array(c, flow, shape::unknown()).concat();
    return grads{{}, value, {}, flow};
  });
}

} // namespace runnel
