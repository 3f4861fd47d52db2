#pragma once
// The builtin CPU kernels, registered where they are written (ops/cpu/*.cpp) and gathered here.
// The GPU devices take their fallbacks from this registry too.
#include <map>

#include "runnel/ops/kernel/kernel.hpp"

namespace runnel {

/// Registers every builtin CPU kernel.
void register_builtin_kernels(kernel_registry& reg);
/// The registry of builtin kernels, built explicitly on first use.
const kernel_registry& builtin_kernels();
/// Op name -> the RUNNEL_KERNEL_FAMILY that registers its CPU kernels (the wrapper families,
/// which add 16-bit kernels to others' ops, are left out); see ops/defs/families.hpp.
std::map<std::string, std::string> builtin_kernel_families();

} // namespace runnel
