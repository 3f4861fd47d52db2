#pragma once
// Helpers of the [.gpu] tests: random inputs, the test's GPU context, copies both ways, and
// comparisons with the CPU kernels' results (tolerances per dtype).
#include <random>

#include "runnel/ops/cuda/kernels.hpp"
#include "runnel/ops/gpu/gpu_info.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/tests/eval.hpp"

namespace runnel::testing {

/// Uniform values in [lo, hi) of dtype `t` (i32: ten times as large, truncated).
inline tensor random_host(dtype t, shape s, uint32_t seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  tensor f(dtype::f64, s);
  for (auto& v : f.flat<double>())
    v = d(rng);
  graph g;
  auto c = cast(constant(g, f), t);
  return eval1(t == dtype::i32 ? cast(cast(constant(g, f) * 10.0, dtype::i32), t) : c);
}

inline double tolerance(dtype t) {
  switch (t) {
    case dtype::bf16:
      return 1.6e-2;
    case dtype::f16:
      return 2e-3;
    case dtype::f32:
      return 1e-5;
    default:
      return 1e-12;
  }
}

/// The tests' GPU ([.gpu] tests only run where there is one).
inline gpu_context& gpu() {
  static auto ctx = gpu_context::create(0).value();
  return *ctx;
}

inline tensor on_gpu(const tensor& host) {
  return gpu().to_device(host, "input").value();
}

inline tensor back(const tensor& dev) {
  return gpu().to_host(dev).value();
}

inline void check_matches(const tensor& got, const tensor& want, double rtol, double atol = 1e-5) {
  if (want.type() == dtype::f16 || want.type() == dtype::bf16 || want.type() == dtype::f32 ||
      want.type() == dtype::f64) {
    graph g;
    auto r = eval({cast(constant(g, got), dtype::f64), cast(constant(g, want), dtype::f64)});
    check_close(r[0], r[1], rtol, atol);
  } else {
    check_equal(got, want);
  }
}

} // namespace runnel::testing
