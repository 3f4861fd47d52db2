// The builtin op registry: every family of ops/defs/, from the list the build generates out of
// the RUNNEL_OP_FAMILY lines (cmake/ops_families.cmake) — a new family file is found by itself.
#include "runnel/ops/defs/families.hpp"
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {

#define RUNNEL_FAMILY(family, fn) void register_##fn##_ops(op_registry& reg);
#include "runnel/ops/defs/op_families.inc"
#undef RUNNEL_FAMILY

void register_builtin_ops(op_registry& reg) {
#define RUNNEL_FAMILY(family, fn) register_##fn##_ops(reg);
#include "runnel/ops/defs/op_families.inc"
#undef RUNNEL_FAMILY
}

std::map<std::string, std::string> builtin_op_families() {
  std::map<std::string, std::string> out;
  auto record = [&](const char* family, void (*add)(op_registry&)) {
    op_registry one;
    add(one);
    for (auto& op : one.names())
      out[op] = family;
  };
#define RUNNEL_FAMILY(family, fn) record(#family, register_##fn##_ops);
#include "runnel/ops/defs/op_families.inc"
#undef RUNNEL_FAMILY
  return out;
}

const op_registry& builtin_ops() {
  static const op_registry* reg = [] {
    auto* r = new op_registry;
    register_builtin_ops(*r);
    return r;
  }();
  return *reg;
}

} // namespace runnel
