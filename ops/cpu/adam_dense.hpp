#pragma once
// Adam's update over dense float32 arrays, vectorized for the machine it runs on
// (ops/cpu/adam_dense.cpp).
#include <cstdint>

namespace runnel {

/// m += (g - m)(1 - b1); v += (g² - v)(1 - b2); var -= lr_t·step / (√v + eps), step = m, or
/// with Nesterov m·b1 + (1 - b1)·g: element by element, the same bits on every machine as the
/// scalar loop of ops/cpu/training.cpp.
void adam_dense_f32(float* var, float* m, float* v, const float* g, int64_t n, float lr_t, float b1,
                    float b2, float eps, bool nesterov);

} // namespace runnel
