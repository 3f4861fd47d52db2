// The random ops have no gradient.
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(random) {
  for (auto op : {"RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomShuffle"})
    reg.add_non_differentiable(op);
}

} // namespace runnel
