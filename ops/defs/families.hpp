#pragma once
// Which family defines each builtin op: the name in its file's RUNNEL_OP_FAMILY line. With
// builtin_kernel_families() (ops/cpu/builtin_kernels.hpp) and builtin_gradient_families()
// (ops/grad/families.hpp) it lets a test hold the layers to one family name per op.
#include <map>
#include <string>

namespace runnel {

/// Op name -> the family that defines it.
std::map<std::string, std::string> builtin_op_families();

} // namespace runnel
