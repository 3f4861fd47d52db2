#pragma once
// The builtin CPU kernels, registered where they are written (ops/cpu/*.cpp) and gathered here.
// The GPU devices take their fallbacks from this registry too.
#include "runnel/ops/kernel/kernel.hpp"

namespace runnel {

/// Registers every builtin CPU kernel.
void register_builtin_kernels(kernel_registry& reg);
/// The registry of builtin kernels, built explicitly on first use.
const kernel_registry& builtin_kernels();

} // namespace runnel
