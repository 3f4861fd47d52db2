// The builtin CPU kernel registry: every family of ops/cpu/, from the list the build generates out
// of the RUNNEL_KERNEL_FAMILY lines (cmake/ops_families.cmake) — a new family file is found by
// itself. The wrapper families run after the others, since they derive kernels from theirs.
#include "runnel/ops/cpu/builtin_kernels.hpp"

namespace runnel {

#define RUNNEL_FAMILY(family) void register_##family##_kernels(kernel_registry& reg);
#define RUNNEL_WRAPPERS(family) RUNNEL_FAMILY(family)
#include "runnel/ops/cpu/kernel_families.inc"
#undef RUNNEL_WRAPPERS
#undef RUNNEL_FAMILY

void register_builtin_kernels(kernel_registry& reg) {
#define RUNNEL_FAMILY(family) register_##family##_kernels(reg);
#define RUNNEL_WRAPPERS(family) RUNNEL_FAMILY(family)
#include "runnel/ops/cpu/kernel_families.inc"
#undef RUNNEL_WRAPPERS
#undef RUNNEL_FAMILY
}

const kernel_registry& builtin_kernels() {
  static const kernel_registry* reg = [] {
    auto* r = new kernel_registry;
    register_builtin_kernels(*r);
    return r;
  }();
  return *reg;
}

} // namespace runnel
