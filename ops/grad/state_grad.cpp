// VariableV2 is a source: no gradient flows into it (a gradient with respect to a variable is
// taken at its value).
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(state) {
  reg.add_non_differentiable("VariableV2");
}

} // namespace runnel
