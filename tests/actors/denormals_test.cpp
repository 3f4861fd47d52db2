// Denormal floats are flushed to zero wherever kernels compute (ops/core/float_env.hpp), as
// TensorFlow's executor does: on the node actors' threads, on the intra-op pool's, in a
// variable's updates and in constant folding; and the calling thread's float mode is left as it
// was. Each value below is a denormal result (flush-to-zero) or a denormal input
// (denormals-are-zero) that would otherwise survive.
#include <catch2/catch.hpp>

#include "runnel/ops/core/float_env.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("denormal floats are flushed to zero where kernels run, and the caller's float mode "
          "is left alone",
          "[actors]") {
#ifndef RUNNEL_HAS_MXCSR
  SUCCEED("no MXCSR on this machine: denormals are the hardware's business");
#else
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1}, "x");
  // The smallest normal float32 is 1.18e-38.
  auto half = x * 0.5;                     // 2e-38 * 0.5 = 1e-38: a denormal result, flushed
  auto big = x * 1e30;                     // 1e-39 is a denormal input, read as zero
  auto folded = constant(g, 2e-38f) * 0.5; // computed once, by constant folding
  auto v = variable(g, constant(g, 3e-38f), "denormals_v"); // (the test runtime is shared)
  auto update = assign_add(v, constant(g, -2e-38f));        // 1e-38 on the variable's actor
  session s(test_runtime(), g);
  bool caller_flushed = flushing_denormals();
  auto r = s.run({{x, tensor::vector<float>({2e-38f, 1e-39f, 1.f})}}, {half, big, folded}).value();
  CHECK(r[0].data<float>()[0] == 0.f);
  CHECK(r[0].data<float>()[1] == 0.f);
  CHECK(r[0].data<float>()[2] == 0.5f);
  CHECK(r[1].data<float>()[0] == Approx(2e-8f));
  CHECK(r[1].data<float>()[1] == 0.f);
  CHECK(r[2].data<float>()[0] == 0.f);
  REQUIRE(s.run({v.initializer}).ok());
  CHECK(s.run({}, {update}).value()[0].data<float>()[0] == 0.f);
  // A million elements: split over the intra-op pool's threads.
  tensor many(dtype::f32, shape{1 << 20});
  std::fill_n(many.data<float>(), many.num_elements(), 2e-38f);
  auto m = s.run({{x, many}}, {half}).value()[0];
  CHECK(std::count(m.data<float>(), m.data<float>() + m.num_elements(), 0.f) == m.num_elements());
  CHECK(flushing_denormals() == caller_flushed);
#endif
}
