// Gradients through cond and while_loop: each checked against central finite differences and
// against the gradient of the same computation unrolled statically; loop invariants, TensorArray
// inputs and outputs, nested loops, a cond inside a loop, and training through a loop.
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/kernel/step_resources.hpp"
#include "runnel/ops/layers/tensor_array.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

using vars = std::vector<output>;


/// d y / d x at `x0` by central differences, one element of x at a time (y a scalar).
tensor numeric_grad(session& s, output y, output x, const tensor& x0, feed_list feeds = {},
                    double eps = 1e-6) {
  tensor grad(dtype::f64, x0.shape());
  feeds.push_back({x, x0});
  size_t slot = feeds.size() - 1;
  for (int64_t i = 0; i < x0.num_elements(); ++i) {
    double f[2];
    for (int side = 0; side < 2; ++side) {
      tensor xp = x0.copy();
      xp.data<double>()[i] += side ? eps : -eps;
      feeds[slot].second = xp;
      auto r = s.run(feeds, {y});
      REQUIRE(r.ok());
      f[side] = *r.value()[0].data<double>();
    }
    grad.data<double>()[i] = (f[1] - f[0]) / (2 * eps);
  }
  return grad;
}

tensor run1(session& s, output o, const feed_list& feeds) {
  auto r = s.run(feeds, {o});
  INFO((r.ok() ? std::string("ok") : r.error().to_string()));
  REQUIRE(r.ok());
  return r.value()[0];
}

int64_t settled() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((step_resources::live() != 0 || control_flow_state_in_use() != 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  return step_resources::live() + control_flow_state_in_use();
}

} // namespace

TEST_CASE("gradients through cond: the branch taken, imports, finite differences",
          "[actors][control_flow][gradients]") {
  graph g;
  auto p = placeholder(g, dtype::boolean, shape{}, "p");
  auto x = placeholder(g, dtype::f64, shape{3}, "x");
  auto w = placeholder(g, dtype::f64, shape{3}, "w");
  // x is used in both branches and outside; w only in the true branch.
  auto y = cond(p, [&] { return x * x * w; }, [&] { return x * 3.0; });
  auto loss = sum(y * x);
  auto grads = gradients({loss}, {x, w}, {}, {.unconnected_zeros = true});
  session s(test_runtime(), g);
  tensor x0 = random_f64({3}, 1), w0 = random_f64({3}, 2);
  for (bool taken : {true, false}) {
    feed_list feeds{{p, tensor::scalar(taken)}, {w, w0}};
    auto gx = s.run({{p, tensor::scalar(taken)}, {w, w0}, {x, x0}}, grads).value();
    check_close(gx[0], numeric_grad(s, loss, x, x0, feeds), 1e-6, 1e-7);
    feed_list fw{{p, tensor::scalar(taken)}, {x, x0}};
    check_close(gx[1], numeric_grad(s, loss, w, w0, fw), 1e-6, 1e-7);
    if (!taken) // w is not used by the false branch: its gradient is zeros
      check_equal(gx[1], tensor::vector<double>({0, 0, 0}));
  }
  CHECK(settled() == 0);
}

TEST_CASE("gradients through while_loop: loop variables and invariants against the unrolled "
          "graph and finite differences",
          "[actors][control_flow][gradients]") {
  graph g;
  auto x = placeholder(g, dtype::f64, shape{2}, "x");
  auto w = placeholder(g, dtype::f64, shape{2}, "w");
  auto n = placeholder(g, dtype::i32, shape{}, "n");
  // v <- v * w + sin(v), n times: w is a loop invariant, its gradient sums over iterations.
  auto out = while_loop([&](const vars& v) { return less(v[0], n); },
                        [&](const vars& v) {
                          return vars{v[0] + constant(g, int32_t(1)), v[1] * w + sin(v[1])};
                        },
                        {constant(g, int32_t(0)), x});
  auto loss = sum(square(out[1]));
  auto dyn = gradients({loss}, {x, w});
  // The same computation unrolled for n = 4.
  output v = x;
  for (int i = 0; i < 4; ++i)
    v = v * w + sin(v);
  auto unrolled_loss = sum(square(v));
  auto stat = gradients({unrolled_loss}, {x, w});

  session s(test_runtime(), g);
  tensor x0 = random_f64({2}, 3), w0 = random_f64({2}, 4);
  feed_list feeds{{x, x0}, {w, w0}, {n, tensor::scalar<int32_t>(4)}};
  auto d = s.run(feeds, dyn).value();
  auto st = s.run(feeds, stat).value();
  check_close(d[0], st[0], 1e-12, 1e-12);
  check_close(d[1], st[1], 1e-12, 1e-12);
  check_close(run1(s, loss, feeds), run1(s, unrolled_loss, feeds), 1e-12, 1e-12);
  feed_list for_x{{w, w0}, {n, tensor::scalar<int32_t>(4)}};
  check_close(d[0], numeric_grad(s, loss, x, x0, for_x), 1e-6, 1e-7);
  feed_list for_w{{x, x0}, {n, tensor::scalar<int32_t>(4)}};
  check_close(d[1], numeric_grad(s, loss, w, w0, for_w), 1e-6, 1e-7);
  // Zero iterations: the gradient passes straight through.
  auto zero = s.run({{x, x0}, {w, w0}, {n, tensor::scalar<int32_t>(0)}}, dyn).value();
  check_close(zero[0], s.run({{x, x0}}, {gradients({sum(square(x))}, {x})[0]}).value()[0]);
  check_equal(zero[1], tensor::vector<double>({0, 0}));
  CHECK(settled() == 0);
}

TEST_CASE("a variable made outside a loop while its body is built gets its gradient",
          "[actors][control_flow][gradients]") {
  // What an RNN cell first called in a loop body does: its variable is made outside the loop
  // (after the loop's Exits, before its body) and read in the body as an invariant. The gradient
  // must reach the variable itself, not stop at its read.
  graph g;
  auto x = placeholder(g, dtype::f64, shape{2}, "x");
  graph_variable w;
  auto out = while_loop([&](const vars& v) { return less(v[0], constant(g, int32_t(3))); },
                        [&](const vars& v) {
                          {
                            auto outside = g.enter_context(nullptr);
                            if (!w.ref.valid())
                              w = variable(g, constant(g, tensor::vector<double>({2, 3})), "w");
                          }
                          return vars{v[0] + constant(g, int32_t(1)), v[1] * w.value};
                        },
                        {constant(g, int32_t(0)), x});
  auto loss = sum(out[1]);
  auto by_ref = gradients({loss}, {w.ref});
  auto by_value = gradients({loss}, {w.value});
  REQUIRE(by_ref[0].valid());
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  feed_list feeds{{x, tensor::vector<double>({1, 1})}};
  // d/dw sum(x * w^3) = 3 x w^2
  INFO("by ref");
  check_close(s.run(feeds, by_ref).value()[0], tensor::vector<double>({12, 27}));
  INFO("by value");
  check_close(s.run(feeds, by_value).value()[0], tensor::vector<double>({12, 27}));
  CHECK(settled() == 0);
}

TEST_CASE("gradients through a dynamic RNN over TensorArrays match the static unrolling",
          "[actors][control_flow][gradients]") {
  graph g;
  const int steps = 5, batch = 2, in = 3, hidden = 4;
  auto xs = placeholder(g, dtype::f64, shape{steps, batch, in}, "xs");
  auto h0 = placeholder(g, dtype::f64, shape{batch, hidden}, "h0");
  auto w = constant(g, random_f64({in, hidden}, 5));
  auto u = constant(g, random_f64({hidden, hidden}, 6));
  auto b = constant(g, random_f64({hidden}, 7));
  tensor_array inputs = tensor_array(g, dtype::f64, constant(g, int32_t(steps)),
                                     {.element_shape = shape{batch, in}})
                            .unstack(xs);
  tensor_array outputs(g, dtype::f64, constant(g, int32_t(steps)),
                       {.element_shape = shape{batch, hidden}});
  auto r = while_loop(
      [&](const vars& v) { return less(v[0], constant(g, int32_t(steps))); },
      [&](const vars& v) {
        auto h = tanh(matmul(inputs.read(v[0]), w) + matmul(v[1], u) + b);
        return vars{v[0] + constant(g, int32_t(1)), h,
                    outputs.with_flow(v[2]).write(v[0], h).flow()};
      },
      {constant(g, int32_t(0)), h0, outputs.flow()});
  auto all = outputs.with_flow(r[2]).stack();
  auto loss = sum(all * all) + sum(r[1]);
  auto dyn = gradients({loss}, {xs, h0, w, u, b});

  std::vector<output> hs;
  output h = h0;
  auto x_steps = unstack(xs, steps);
  for (int t = 0; t < steps; ++t) {
    h = tanh(matmul(x_steps[size_t(t)], w) + matmul(h, u) + b);
    hs.push_back(h);
  }
  auto all_static = stack(hs);
  auto static_loss = sum(all_static * all_static) + sum(h);
  auto stat = gradients({static_loss}, {xs, h0, w, u, b});

  session s(test_runtime(), g);
  feed_list feeds{{xs, random_f64({steps, batch, in}, 8)}, {h0, random_f64({batch, hidden}, 9)}};
  check_close(run1(s, loss, feeds), run1(s, static_loss, feeds), 1e-12, 1e-12);
  auto d = s.run(feeds, dyn).value();
  auto st = s.run(feeds, stat).value();
  for (size_t k = 0; k < d.size(); ++k) {
    INFO("gradient " << k);
    check_close(d[k], st[k], 1e-10, 1e-12);
  }
  feed_list for_h0{feeds[0]};
  check_close(d[1], numeric_grad(s, loss, h0, feeds[1].second, for_h0), 1e-6, 1e-7);
  CHECK(settled() == 0);
}

TEST_CASE("gradients through nested while loops", "[actors][control_flow][gradients]") {
  graph g;
  auto x = placeholder(g, dtype::f64, shape{}, "x");
  auto w = placeholder(g, dtype::f64, shape{}, "w");
  auto one = constant(g, int32_t(1));
  // 3 outer iterations of 2 inner iterations of v <- v * w + 0.1 * v * v.
  auto outer = while_loop([&](const vars& v) { return less(v[0], constant(g, int32_t(3))); },
                          [&](const vars& v) {
                            auto inner = while_loop(
                                [&](const vars& u) { return less(u[0], constant(g, int32_t(2))); },
                                [&](const vars& u) {
                                  return vars{u[0] + one, u[1] * w + 0.1 * u[1] * u[1]};
                                },
                                {constant(g, int32_t(0)), v[1]});
                            return vars{v[0] + one, inner[1]};
                          },
                          {constant(g, int32_t(0)), x});
  auto dyn = gradients({outer[1]}, {x, w});
  output v = x;
  for (int i = 0; i < 6; ++i)
    v = v * w + 0.1 * v * v;
  auto stat = gradients({v}, {x, w});
  session s(test_runtime(), g);
  feed_list feeds{{x, tensor::scalar(0.7)}, {w, tensor::scalar(0.9)}};
  check_close(run1(s, outer[1], feeds), run1(s, v, feeds), 1e-12, 1e-12);
  auto d = s.run(feeds, dyn).value();
  auto st = s.run(feeds, stat).value();
  check_close(d[0], st[0], 1e-10, 1e-12);
  check_close(d[1], st[1], 1e-10, 1e-12);
  CHECK(settled() == 0);
}

TEST_CASE("gradients through a cond inside a while loop", "[actors][control_flow][gradients]") {
  graph g;
  auto x = placeholder(g, dtype::f64, shape{2}, "x");
  auto w = placeholder(g, dtype::f64, shape{2}, "w");
  auto two = constant(g, int32_t(2));
  // Even iterations multiply by w, odd ones add sin(v) * w.
  auto out = while_loop(
      [&](const vars& v) { return less(v[0], constant(g, int32_t(5))); },
      [&](const vars& v) {
        auto even = equal(floor_mod(v[0], two), constant(g, int32_t(0)));
        auto next = cond(even, [&] { return v[1] * w; }, [&] { return v[1] + sin(v[1]) * w; });
        return vars{v[0] + constant(g, int32_t(1)), next};
      },
      {constant(g, int32_t(0)), x});
  auto loss = sum(square(out[1]));
  auto dyn = gradients({loss}, {x, w});
  output v = x;
  for (int i = 0; i < 5; ++i)
    v = i % 2 == 0 ? v * w : v + sin(v) * w;
  auto stat = gradients({sum(square(v))}, {x, w});
  session s(test_runtime(), g);
  feed_list feeds{{x, random_f64({2}, 10)}, {w, random_f64({2}, 11)}};
  auto d = s.run(feeds, dyn).value();
  auto st = s.run(feeds, stat).value();
  check_close(d[0], st[0], 1e-10, 1e-12);
  check_close(d[1], st[1], 1e-10, 1e-12);
  CHECK(settled() == 0);
}

TEST_CASE("training a model whose forward pass is a while_loop converges",
          "[actors][control_flow][gradients]") {
  graph g;
  g.set_seed(1);
  // Learn w, b so that 4 steps of h <- tanh(h * w + b) from h0 = x map x to 0.5 * x.
  auto x = placeholder(g, dtype::f32, shape{-1}, "x");
  auto w = variable(g, constant(g, 0.5f), "w");
  auto b = variable(g, constant(g, 0.0f), "b");
  auto out = while_loop([&](const vars& v) { return less(v[0], constant(g, int32_t(4))); },
                        [&](const vars& v) {
                          return vars{v[0] + constant(g, int32_t(1)), tanh(v[1] * w.value + b.value)};
                        },
                        {constant(g, int32_t(0)), x});
  auto loss = mean(square(out[1] - x * 0.5f));
  gradient_descent_optimizer opt(1.0);
  auto train = opt.minimize(loss);
  auto init = global_variables_initializer(g);
  session s(test_runtime(), g);
  REQUIRE(s.run({}, {}, {init}).ok());
  feed_list feeds{{x, tensor::vector<float>({-0.8f, -0.3f, 0.2f, 0.6f, 0.9f})}};
  float first = *run1(s, loss, feeds).data<float>();
  for (int i = 0; i < 300; ++i)
    REQUIRE(s.run(feeds, {}, {train}).ok());
  float last = *run1(s, loss, feeds).data<float>();
  INFO("loss " << first << " -> " << last);
  CHECK(last < first * 0.05f);
  CHECK(settled() == 0);
}

TEST_CASE("gradients of a tensor inside a loop is an error naming it and the loop",
          "[actors][control_flow][gradients]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{}, "x");
  output inside;
  while_loop([&](const vars& v) { return less(v[0], constant(g, 3.0f)); },
             [&](const vars& v) {
               inside = v[0] * x;
               return vars{inside};
             },
             {x}, {.name = "grow"});
  try {
    gradients({inside}, {x});
    FAIL("no error");
  } catch (const error& e) {
    CHECK_THAT(e.what(), Catch::Contains(inside.name()) && Catch::Contains("while loop 'grow'"));
  }
}

TEST_CASE("loop gradients with maximum_iterations, one iteration at a time, many iterations",
          "[actors][control_flow][gradients]") {
  graph g;
  auto x = placeholder(g, dtype::f64, shape{}, "x");
  // v <- v * 0.99 + 0.01 * sin(v) while true, stopped by maximum_iterations = 300.
  auto out = while_loop([&](const vars&) { return constant(g, true); },
                        [&](const vars& v) { return vars{v[0] * 0.99 + 0.01 * sin(v[0])}; },
                        {x}, {.parallel_iterations = 1, .maximum_iterations = 300});
  auto dyn = gradients({out[0]}, {x})[0];
  output v = x;
  for (int i = 0; i < 300; ++i)
    v = v * 0.99 + 0.01 * sin(v);
  auto stat = gradients({v}, {x})[0];
  session s(test_runtime(), g);
  feed_list feeds{{x, tensor::scalar(0.8)}};
  check_close(run1(s, dyn, feeds), run1(s, stat, feeds), 1e-10, 1e-12);
  check_close(run1(s, dyn, feeds), numeric_grad(s, out[0], x, tensor::scalar(0.8)), 1e-6, 1e-8);
  CHECK(settled() == 0);
}

TEST_CASE("an aborted step with a loop gradient in flight leaves no TensorArray behind",
          "[actors][control_flow][gradients]") {
  graph g;
  auto x = placeholder(g, dtype::f64, shape{}, "x");
  auto n = placeholder(g, dtype::i32, shape{}, "n");
  auto out = while_loop([&](const vars& v) { return less(v[0], n); },
                        [&](const vars& v) {
                          return vars{v[0] + constant(g, int32_t(1)), v[1] * 1.0000001};
                        },
                        {constant(g, int32_t(0)), x});
  auto grad = gradients({out[1]}, {x})[0];
  session s(test_runtime(), g);
  run_metadata md;
  // Ten million iterations cannot finish in 50 ms: the deadline aborts the step mid-loop.
  auto r = s.run({{x, tensor::scalar(1.0)}, {n, tensor::scalar<int32_t>(10'000'000)}}, {grad}, {},
                 {.timeout = std::chrono::milliseconds(50)}, &md);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::deadline_exceeded);
  CHECK(settled() == 0);
  // The session still computes the gradient afterwards.
  check_close(run1(s, grad, {{x, tensor::scalar(1.0)}, {n, tensor::scalar<int32_t>(3)}}),
              tensor::scalar(std::pow(1.0000001, 3)), 1e-12, 1e-12);
}
