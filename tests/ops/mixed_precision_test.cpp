// Mixed-precision training: float32 master weights, 16-bit compute, loss scaling for float16.
#include <cmath>

#include "runnel/ops/train/mixed_precision.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

struct linear_model {
  graph g;
  graph_variable w;
  output loss;
};

/// loss = mean((x·w - y)²) over a fixed batch, computed in `compute` with float32 weights;
/// the target weights are [1, -2, 3]. `loss_factor` scales the loss (tiny: its gradients
/// underflow in float16).
void build(linear_model& m, dtype compute, double loss_factor = 1.0) {
  graph& g = m.g;
  auto x = constant(g, vals<float>({4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}));
  auto y = constant(g, vals<float>({4, 1}, {1, -2, 3, 2}));
  m.w = variable(g, zeros(g, dtype::f32, {3, 1}), "mp_w");
  auto pred = to_compute(matmul(to_compute(x, compute), to_compute(m.w.value, compute)), dtype::f32);
  m.loss = mean(square(pred - y)) * loss_factor;
}

} // namespace

TEST_CASE("bfloat16 compute trains float32 weights", "[actors][precision]") {
  runtime rt;
  linear_model m;
  build(m, dtype::bf16);
  REQUIRE(m.w.value.type() == dtype::f32);
  gradient_descent_optimizer sgd(0.2);
  auto train = sgd.minimize(m.loss);
  session s(rt, m.g);
  REQUIRE(s.run({global_variables_initializer(m.g)}).ok());
  for (int i = 0; i < 200; ++i)
    REQUIRE(s.run({train}).ok());
  auto w = s.run({}, {m.w.value}).value()[0];
  CHECK(w.data<float>()[0] == Approx(1).margin(0.05));
  CHECK(w.data<float>()[1] == Approx(-2).margin(0.05));
  CHECK(w.data<float>()[2] == Approx(3).margin(0.05));
}

TEST_CASE("loss scaling keeps float16 gradients from underflowing", "[actors][precision]") {
  // The loss is scaled by 1e-8: its gradients (~1e-8) are below float16's smallest subnormal
  // (6e-8) after the cast back, so without scaling nothing trains.
  auto run = [](bool scaled) {
    runtime rt;
    linear_model m;
    build(m, dtype::f16, 1e-8);
    gradient_descent_optimizer sgd(2e7);
    operation train;
    loss_scale_optimizer ls(sgd, {.initial_scale = 65536, .dynamic = false});
    train = scaled ? ls.minimize(m.loss) : sgd.minimize(m.loss);
    session s(rt, m.g);
    REQUIRE(s.run({global_variables_initializer(m.g)}).ok());
    for (int i = 0; i < 100; ++i)
      REQUIRE(s.run({train}).ok());
    return s.run({}, {m.w.value}).value()[0];
  };
  auto unscaled = run(false), scaled = run(true);
  CHECK(std::abs(unscaled.data<float>()[1]) < 0.05f); // barely moved
  CHECK(scaled.data<float>()[0] == Approx(1).margin(0.1));
  CHECK(scaled.data<float>()[1] == Approx(-2).margin(0.1));
}

TEST_CASE("dynamic loss scaling skips overflowing steps and halves the scale", "[actors][precision]") {
  runtime rt;
  linear_model m;
  build(m, dtype::f16);
  gradient_descent_optimizer sgd(0.1);
  // 2^30 × gradients of ~1 overflow float16 (max 65504): the first steps must be skipped.
  loss_scale_optimizer ls(sgd, {.initial_scale = 1 << 30, .growth_interval = 3});
  auto train = ls.minimize(m.loss);
  session s(rt, m.g);
  REQUIRE(s.run({global_variables_initializer(m.g)}).ok());
  auto r = s.run({}, {ls.gradients_finite(), ls.scale(), m.w.value}, {train}).value();
  CHECK_FALSE(r[0].data<bool>()[0]);
  auto w = s.run({}, {m.w.value}).value()[0];
  CHECK(w.data<float>()[0] == 0.f); // the skipped step left the weights alone
  CHECK(s.run({}, {ls.scale()}).value()[0].data<float>()[0] == float(1 << 29));
  int skipped = 1;
  for (; skipped < 40; ++skipped) {
    auto f = s.run({}, {ls.gradients_finite()}, {train}).value()[0];
    if (f.data<bool>()[0])
      break;
  }
  INFO("overflowing steps: " << skipped);
  CHECK(skipped > 5);
  CHECK(skipped < 30);
  float scale = s.run({}, {ls.scale()}).value()[0].data<float>()[0];
  // Three finite steps in a row double the scale.
  for (int i = 0; i < 3; ++i)
    REQUIRE(s.run({train}).ok());
  CHECK(s.run({}, {ls.scale()}).value()[0].data<float>()[0] >= scale);
  CHECK(s.run({}, {m.w.value}).value()[0].data<float>()[0] != 0.f);
}

TEST_CASE("the loss of a scaled optimizer must be float32", "[actors][precision]") {
  graph g;
  auto w = variable(g, zeros(g, dtype::f32, {2}), "mp_bad_w");
  auto loss = sum(cast(w.value, dtype::f16));
  gradient_descent_optimizer sgd(0.1);
  loss_scale_optimizer ls(sgd);
  CHECK_THROWS_WITH(ls.minimize(loss), Catch::Contains("float16") && Catch::Contains("float32"));
}
