#pragma once
// The unary element-wise rows over float32 compiled for wider vectors than the build's baseline
// (x86-64: SSE2), chosen once per process by what the CPU supports. Eigen picks its packet size
// when compiled, so the baseline build runs tanh at ~1 ns and exp at ~2 ns an element on CPUs
// that do them in 0.3 with AVX-512; our machines are Intel and AMD with AVX-512 and AMD with AVX2
// only.
//
//   unary_f32(unary_op::Tanh, x, y, n);   // the widest vectors here, or the baseline's
//
// Each variant is its own translation unit (ops/cpu/unary_avx512.cpp, unary_avx2.cpp, both
// including unary_wide.inc) in which the token `Eigen` is renamed, so that none of Eigen's
// inline functions compiled for one ISA can stand in for the baseline's at link time (one
// definition per name); tests/ops/unary_wide_symbols.sh checks that the objects define no other
// shared symbol.

#include <cstdint>

#include "runnel/ops/core/unary_ops.hpp"

namespace runnel {

/// y[i] = op(x[i]) for i < n with the widest vectors the CPU has; false (nothing written) where it
/// has neither AVX-512 nor AVX2 with FMA.
bool unary_f32_wide(unary_op op, const float* x, float* y, int64_t n);

/// y[i] = op(x[i]) for i < n: the widest variant the CPU has, else the baseline's Eigen code.
/// What kernels call (x == y is allowed).
void unary_f32(unary_op op, const float* x, float* y, int64_t n);

/// The ISA unary_f32_wide uses here: "avx512", "avx2" or "" (none).
const char* unary_wide_isa();

// The variants themselves: call them only on a CPU with their ISA (tests run each one the CPU
// has; everything else goes through unary_f32_wide).
namespace avx512 {
void unary_f32(unary_op op, const float* x, float* y, int64_t n);
}
namespace avx2 {
void unary_f32(unary_op op, const float* x, float* y, int64_t n);
}

} // namespace runnel
