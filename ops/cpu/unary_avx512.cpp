// The unary rows over float32 for AVX-512 (ops/cpu/unary_wide.hpp); built with -mavx512f and
// its companions.
#define RUNNEL_WIDE_NS avx512
#define RUNNEL_WIDE_EIGEN Eigen_avx512
#include "runnel/ops/cpu/unary_wide.inc"
