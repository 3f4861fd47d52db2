#pragma once
// Which family registers each builtin gradient function: the name in its file's
// RUNNEL_GRADIENT_FAMILY line (see ops/defs/families.hpp).
#include <map>
#include <string>

namespace runnel {

/// Op name -> the family that registers its gradient function (dense or sparse) or marks it as
/// having none.
std::map<std::string, std::string> builtin_gradient_families();

} // namespace runnel
