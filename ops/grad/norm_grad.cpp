// Gradient functions of the normalization ops.
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(norm) {
  using grads = std::vector<output>;
  reg.add("FusedBatchNorm", [](const gradient_context& c) {
    // From the saved mean and 1/sqrt(var + eps) (outputs 3 and 4); mean and variance inputs get
    // no gradient (in training they are unused, in inference they are statistics, not weights).
    auto attrs = same_attrs(c.n, {"epsilon", "data_format", "is_training"});
    auto outs = c.g.build(
        "FusedBatchNormGrad", "FusedBatchNormGrad",
        {c.grad(0).ep(), c.input(0).ep(), c.input(1).ep(), c.out(3).ep(), c.out(4).ep()}, attrs);
    return grads{outs[0], outs[1], outs[2], output(), output()};
  });
  reg.add_non_differentiable("FusedBatchNormGrad");
}

} // namespace runnel
