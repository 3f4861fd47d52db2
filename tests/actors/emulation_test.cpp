// EmulatedCompute (ops/layers/emulation.hpp) and partitioned variables (ops/layers/embedding.hpp):
// what the scaling benchmark's synthetic model is made of.
#include <chrono>

#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/layers/emulation.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("EmulatedCompute fills its outputs from its inputs' first elements", "[emulation]") {
  graph g;
  auto a = constant(g, vals<float>({2}, {1.5f, 100}));
  auto b = constant(g, vals<float>({1}, {2.5f}));
  auto outs = emulated_compute({a, b}, 0, {shape{2, 3}, shape{1}}, "layer", 0.5);
  REQUIRE(outs.size() == 2);
  CHECK(outs[0].shape() == shape{2, 3});
  auto v = eval(outs);
  CHECK(v[0].shape() == shape{2, 3});
  for (float x : v[0].flat<float>())
    CHECK(x == 2.0f); // 0.5 x (1.5 + 2.5)
  CHECK(v[1].flat<float>()[0] == 2.0f);
}

TEST_CASE("EmulatedCompute holds its device: two nodes of one device take their times in turn",
          "[emulation]") {
  graph g;
  auto x = constant(g, vals<float>({1}, {1}));
  auto first = emulated_compute({x}, 0.05, {shape{1}}, "first")[0];
  auto second = emulated_compute({x}, 0.05, {shape{1}}, "second")[0];
  session s(test_runtime(), g);
  REQUIRE(s.run({}, {first, second}).ok()); // instantiates
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(s.run({}, {first, second}).ok());
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Independent nodes, but one device: they cannot overlap (an upper bound would be a timing
  // assertion; the lower bound is the behaviour).
  CHECK(took >= 0.1);
}

TEST_CASE("EmulatedCompute refuses output shapes it cannot produce, naming the node",
          "[emulation]") {
  graph g;
  auto x = constant(g, vals<float>({1}, {1}));
  CHECK_THROWS_WITH(emulated_compute({x}, 0.01, {shape{-1, 3}}, "conv9"),
                    Catch::Contains("conv9") && Catch::Contains("fully defined"));
  CHECK_THROWS_WITH(emulated_compute({x}, -1, {shape{1}}, "conv10"),
                    Catch::Contains("conv10") && Catch::Contains("seconds"));
}

TEST_CASE("a partitioned variable can be cut along another axis than the first", "[emulation]") {
  graph g;
  auto pieces = partitioned_variable(
      g, "w", shape{1, 10, 300}, [&](const shape& s) { return filled(g, dtype::f32, s, 0.25); },
      max_size_partitioner(4000), true, dtype::f32, 2);
  // 12,000 bytes in pieces of at most 4,000: three [1, 10, 100] pieces along axis 2.
  REQUIRE(pieces.size() == 3);
  CHECK(pieces[1].name() == "w/part_1");
  CHECK(pieces[2].ref.node().output_shapes.at(0) == shape{1, 10, 100});
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto p = s.run({}, {pieces[2].value}).value()[0];
  CHECK(p.flat<float>()[999] == 0.25f);
  CHECK_THROWS_WITH(partitioned_variable(
                        g, "bad", shape{4, 4},
                        [&](const shape& s) { return zeros(g, dtype::f32, s); },
                        max_size_partitioner(16), true, dtype::f32, 2),
                    Catch::Contains("bad") && Catch::Contains("axis 2"));
}
