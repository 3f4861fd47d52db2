// In-graph replication (ops/train/towers.hpp) on virtual CPU devices; across cluster tasks in
// tests/actors/cluster_test.cpp.
#include <algorithm>

#include "runnel/ops/train/towers.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

tensor xs() {
  return vals<float>({8, 2}, {1, 2, -1, 0.5f, 2, -1, 0, 1, 1.5f, 1, -2, 0, 0.5f, -0.5f, 1, 1});
}
tensor ys() {
  return vals<float>({8, 1}, {1, 0, 2, -1, 0.5f, 1, 0, 2});
}

} // namespace

TEST_CASE("two towers on virtual CPU devices train as one model on the whole batch", "[towers]") {
  runtime rt(runtime_options{.cpu_devices = 2});
  const int steps = 5;
  tensor towers_w;
  {
    graph g;
    auto w = variable(g, constant(g, vals<float>({2, 1}, {0.25f, -0.5f})), "tw_w");
    auto x = placeholder(g, dtype::f32, shape{8, 2}, "x");
    auto y = placeholder(g, dtype::f32, shape{8, 1}, "y");
    gradient_descent_optimizer sgd(0.2);
    auto t = build_towers(g, {"/device:cpu:0", "/device:cpu:1"}, [&](int i) {
      auto xi = slice(x, {4 * i, 0}, {4, 2});
      auto yi = slice(y, {4 * i, 0}, {4, 1});
      return mean(square(sub(matmul(xi, w), yi)));
    }, sgd);
    REQUIRE(t.losses.size() == 2);
    auto train = sgd.apply_gradients(t.grads_and_vars);
    session s(rt, g);
    REQUIRE(s.run({global_variables_initializer(g)}).ok());
    run_metadata md;
    for (int k = 0; k < steps; ++k) {
      auto r = s.run({{x, xs()}, {y, ys()}}, {t.mean_loss}, {train}, {.trace = k == 0}, &md);
      INFO(r.error().to_string());
      REQUIRE(r.ok());
    }
    // Each tower ran on its own device.
    auto ran_on = [&](const std::string& prefix, const std::string& device) {
      return std::any_of(md.nodes.begin(), md.nodes.end(), [&](const node_trace& n) {
        return n.node.rfind(prefix, 0) == 0 && n.device.find(device) != std::string::npos;
      });
    };
    CHECK(ran_on("tower_0/", "cpu:0"));
    CHECK(ran_on("tower_1/", "cpu:1"));
    CHECK_FALSE(ran_on("tower_1/", "cpu:0"));
    towers_w = s.run({}, {w.value}).value()[0];
  }
  graph g;
  auto w = variable(g, constant(g, vals<float>({2, 1}, {0.25f, -0.5f})), "tw_ref_w");
  auto x = placeholder(g, dtype::f32, shape{8, 2}, "x");
  auto y = placeholder(g, dtype::f32, shape{8, 1}, "y");
  auto train = gradient_descent_optimizer(0.2).minimize(mean(square(sub(matmul(x, w), y))));
  session s(rt, g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  for (int k = 0; k < steps; ++k)
    REQUIRE(s.run({{x, xs()}, {y, ys()}}, {}, {train}).ok());
  check_close(towers_w, s.run({}, {w.value}).value()[0], 1e-5, 1e-6);
}

TEST_CASE("towers refuse an empty device list and a loss without variables", "[towers]") {
  graph g;
  auto w = variable(g, constant(g, 1.f), "tw_bad_w");
  gradient_descent_optimizer sgd(0.1);
  CHECK_THROWS_WITH(build_towers(g, {}, [&](int) { return w.value; }, sgd),
                    Catch::Contains("no devices"));
  CHECK_THROWS_WITH(build_towers(g, {"/device:cpu:0"}, [&](int) { return constant(g, 2.f); }, sgd,
                                 {w.ref}),
                    Catch::Contains("depends on none of the variables"));
}
