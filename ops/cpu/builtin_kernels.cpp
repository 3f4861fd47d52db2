// The builtin CPU kernel registry: every family of ops/cpu/, from the list the build generates out
// of the RUNNEL_KERNEL_FAMILY lines (cmake/ops_families.cmake) — a new family file is found by
// itself. The wrapper families run after the others, since they derive kernels from theirs.
#include "runnel/ops/cpu/builtin_kernels.hpp"

namespace runnel {

#define RUNNEL_FAMILY(family, fn) void register_##fn##_kernels(kernel_registry& reg);
#define RUNNEL_WRAPPERS(family, fn) RUNNEL_FAMILY(family, fn)
#include "runnel/ops/cpu/kernel_families.inc"
#undef RUNNEL_WRAPPERS
#undef RUNNEL_FAMILY

void register_builtin_kernels(kernel_registry& reg) {
#define RUNNEL_FAMILY(family, fn) register_##fn##_kernels(reg);
#define RUNNEL_WRAPPERS(family, fn) RUNNEL_FAMILY(family, fn)
#include "runnel/ops/cpu/kernel_families.inc"
#undef RUNNEL_WRAPPERS
#undef RUNNEL_FAMILY
}

std::map<std::string, std::string> builtin_kernel_families() {
  std::map<std::string, std::string> out;
  auto record = [&](const char* family, void (*add)(kernel_registry&)) {
    kernel_registry one;
    add(one);
    for (auto& r : one.registrations())
      out[r.op] = family;
  };
#define RUNNEL_FAMILY(family, fn) record(#family, register_##fn##_kernels);
#define RUNNEL_WRAPPERS(family, fn)
#include "runnel/ops/cpu/kernel_families.inc"
#undef RUNNEL_WRAPPERS
#undef RUNNEL_FAMILY
  return out;
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
