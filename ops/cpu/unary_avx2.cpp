// The unary rows over float32 for AVX2 with FMA (ops/cpu/unary_wide.hpp).
#define RUNNEL_WIDE_NS avx2
#define RUNNEL_WIDE_EIGEN Eigen_avx2
#include "runnel/ops/cpu/unary_wide.inc"
