// Gradient functions of the ops gradients themselves build (expanding, slicing, segment sums).
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(grad_support) {
  for (auto op : {"Size", "Rank", "BroadcastGradientArgs", "ReducedShape"})
    reg.add_non_differentiable(op);
  using grads = std::vector<output>;
  reg.add("ExpandDims", [](const gradient_context& c) {
    return grads{reshape(c.grad(), shape_of(c.input(0))), output()};
  });
  reg.add("Slice", [](const gradient_context& c) {
    // Pad the gradient back to the input's shape: before = begin, after = rest.
    auto x = c.input(0);
    auto begin = cast(c.input(1), dtype::i32);
    auto after = shape_of(x) - begin - shape_of(c.out(0));
    return grads{c.g.build("Pad", "Pad", {c.grad().ep(), stack({begin, after}, 1).ep()})[0],
                 output(), output()};
  });
  reg.add("UnsortedSegmentSum", [](const gradient_context& c) {
    return grads{gather(c.grad(), c.input(1)), output(), output()};
  });
}

} // namespace runnel
