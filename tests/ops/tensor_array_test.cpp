// TensorArrays and Stacks as per-step resources: every operation, inside and outside loops, the
// errors that name the array, and that a step leaves none behind.
#include <chrono>
#include <thread>

#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/kernel/step_resources.hpp"
#include "runnel/ops/layers/tensor_array.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {
using vars = std::vector<output>;
output i32(graph& g, int32_t v) {
  return constant(g, v);
}
/// Waits (bounded) until the steps' last messages let go of their resources.
int64_t settled_resources() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (step_resources::live() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  return step_resources::live();
}
} // namespace

TEST_CASE("TensorArray: write, read, stack, size", "[actors][tensor_array]") {
  graph g;
  tensor_array ta(g, dtype::f32, i32(g, 3));
  auto t = ta.write(i32(g, 0), constant(g, {1.0f, 2.0f}))
               .write(i32(g, 2), constant(g, {5.0f, 6.0f}))
               .write(i32(g, 1), constant(g, {3.0f, 4.0f}));
  auto out = eval({t.stack(), t.size()});
  check_equal(out[0], vals<float>({3, 2}, {1, 2, 3, 4, 5, 6}));
  check_equal(out[1], tensor::scalar<int32_t>(3));
  CHECK(settled_resources() == 0);
}

TEST_CASE("TensorArray: unstack, gather, scatter, split, concat", "[actors][tensor_array]") {
  graph g;
  auto m = constant(g, vals<float>({3, 2}, {1, 2, 3, 4, 5, 6}));
  tensor_array a(g, dtype::f32, i32(g, 3));
  auto u = a.unstack(m);
  auto picked = u.gather(constant(g, {int32_t(2), int32_t(0)}));
  tensor_array b(g, dtype::f32, i32(g, 3));
  auto s = b.scatter(constant(g, {int32_t(2), int32_t(1), int32_t(0)}), m);
  tensor_array c(g, dtype::f32, i32(g, 2));
  auto sp = c.split(constant(g, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f}),
                    constant(g, {int64_t(2), int64_t(3)}));
  auto first = sp.read(i32(g, 1));
  tensor_array d(g, dtype::f32, i32(g, 2));
  auto joined = d.split(constant(g, {1.0f, 2.0f, 3.0f}), constant(g, {int64_t(1), int64_t(2)}))
                    .concat();
  auto out = eval({picked, s.stack(), first, joined});
  check_equal(out[0], vals<float>({2, 2}, {5, 6, 1, 2}));
  check_equal(out[1], vals<float>({3, 2}, {5, 6, 3, 4, 1, 2}));
  check_equal(out[2], tensor::vector<float>({3, 4, 5}));
  check_equal(out[3], tensor::vector<float>({1, 2, 3}));
}

TEST_CASE("TensorArray in a while loop: one element per iteration, dynamic size",
          "[actors][tensor_array]") {
  graph g;
  auto n = placeholder(g, dtype::i32, shape{}, "n");
  tensor_array squares(g, dtype::i32, i32(g, 0), {.dynamic_size = true});
  auto r = while_loop([&](const vars& v) { return less(v[0], n); },
                      [&](const vars& v) {
                        return vars{v[0] + i32(g, 1),
                                    squares.with_flow(v[1]).write(v[0], v[0] * v[0]).flow()};
                      },
                      {i32(g, 0), squares.flow()});
  auto done = squares.with_flow(r[1]);
  auto out = eval({done.stack(), done.size()}, {{n, tensor::scalar<int32_t>(5)}});
  check_equal(out[0], tensor::vector<int32_t>({0, 1, 4, 9, 16}));
  check_equal(out[1], tensor::scalar<int32_t>(5));
  CHECK(settled_resources() == 0);
}

TEST_CASE("TensorArray errors name the array and the index", "[actors][tensor_array]") {
  graph g;
  tensor_array ta(g, dtype::f32, i32(g, 2), {.name = "buf"});
  auto twice = ta.write(i32(g, 0), constant(g, 1.0f)).write(i32(g, 0), constant(g, 2.0f));
  auto e = eval_error(twice.read(i32(g, 0)));
  CHECK_THAT(e.message(), Catch::Contains("written twice") && Catch::Contains("buf"));
  auto past = ta.write(i32(g, 5), constant(g, 1.0f));
  e = eval_error(past.flow());
  CHECK_THAT(e.message(), Catch::Contains("index 5") && Catch::Contains("size is 2"));
  tensor_array once(g, dtype::f32, i32(g, 1));
  auto w = once.write(i32(g, 0), constant(g, 1.0f));
  auto r1 = w.read(i32(g, 0));
  auto r2 = identity(w.with_flow(w.flow()).read(i32(g, 0)));
  session s(test_runtime(), g);
  auto both = s.run({}, {r1, r2});
  REQUIRE_FALSE(both.ok());
  CHECK_THAT(both.error().message(), Catch::Contains("clear_after_read"));
  tensor_array unknown(g, dtype::f32, i32(g, 2));
  e = eval_error(unknown.read(i32(g, 1)));
  CHECK_THAT(e.message(), Catch::Contains("has not been written"));
  CHECK(settled_resources() == 0);
}

TEST_CASE("Stack: pops in reverse push order, errors when empty", "[actors][tensor_array]") {
  graph g;
  auto s = make_stack(g, dtype::f32);
  auto p1 = stack_push(s, constant(g, 1.0f));
  output p2;
  {
    auto after = g.control_dependencies({p1});
    p2 = stack_push(s, constant(g, 2.0f));
  }
  output a, b, c;
  {
    auto after = g.control_dependencies({p2});
    a = stack_pop(s);
  }
  {
    auto after = g.control_dependencies({a});
    b = stack_pop(s);
  }
  auto out = eval({a, b});
  check_equal(out[0], tensor::scalar(2.0f));
  check_equal(out[1], tensor::scalar(1.0f));
  {
    auto after = g.control_dependencies({b});
    c = stack_pop(s);
  }
  auto e = eval_error(c);
  CHECK_THAT(e.message(), Catch::Contains("is empty"));
  CHECK(settled_resources() == 0);
}
