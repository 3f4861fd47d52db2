// Gradient functions of the sparse and partitioning ops.
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/embedding.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(sparse) {
  using grads = std::vector<output>;
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

} // namespace runnel
