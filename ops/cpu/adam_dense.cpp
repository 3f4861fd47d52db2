// Adam's dense float32 update, compiled three times (AVX-512, AVX2 and the x86-64 baseline) and
// picked once per process by what the CPU supports: our machines are Intel and AMD with AVX-512
// and AMD with AVX2 only. This file is built with -fno-math-errno (so that the square root
// vectorizes: nothing reads errno) and -ffp-contract=off (no multiply-add is fused, so every
// variant, and the scalar loop in training.cpp that sparse updates use, rounds each operation
// alike and gives the same bits).
#include "runnel/ops/cpu/adam_dense.hpp"

#include <cmath>

namespace runnel {
namespace {

[[gnu::always_inline]] inline void adam_loop(float* __restrict var, float* __restrict m,
                                             float* __restrict v, const float* __restrict g,
                                             int64_t n, float lr_t, float b1, float b2, float eps,
                                             bool nesterov) {
  const float c1 = 1.f - b1, c2 = 1.f - b2;
  if (nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      float mi = m[i] + (g[i] - m[i]) * c1, vi = v[i] + (g[i] * g[i] - v[i]) * c2;
      m[i] = mi;
      v[i] = vi;
      var[i] -= lr_t * (mi * b1 + c1 * g[i]) / (std::sqrt(vi) + eps);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float mi = m[i] + (g[i] - m[i]) * c1, vi = v[i] + (g[i] * g[i] - v[i]) * c2;
    m[i] = mi;
    v[i] = vi;
    var[i] -= lr_t * mi / (std::sqrt(vi) + eps);
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void adam_avx512(float* var, float* m, float* v, const float* g,
                                                    int64_t n, float lr_t, float b1, float b2,
                                                    float eps, bool nesterov) {
  adam_loop(var, m, v, g, n, lr_t, b1, b2, eps, nesterov);
}
__attribute__((target("avx2"))) void adam_avx2(float* var, float* m, float* v, const float* g,
                                               int64_t n, float lr_t, float b1, float b2, float eps,
                                               bool nesterov) {
  adam_loop(var, m, v, g, n, lr_t, b1, b2, eps, nesterov);
}
const int isa = [] {
  __builtin_cpu_init(); // a static initializer may run before libgcc's own
  return __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
}();
#endif

} // namespace

void adam_dense_f32(float* var, float* m, float* v, const float* g, int64_t n, float lr_t, float b1,
                    float b2, float eps, bool nesterov) {
#if defined(__x86_64__)
  if (isa == 2)
    return adam_avx512(var, m, v, g, n, lr_t, b1, b2, eps, nesterov);
  if (isa == 1)
    return adam_avx2(var, m, v, g, n, lr_t, b1, b2, eps, nesterov);
#endif
  adam_loop(var, m, v, g, n, lr_t, b1, b2, eps, nesterov);
}

} // namespace runnel
