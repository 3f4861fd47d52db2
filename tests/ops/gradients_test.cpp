#include <functional>
#include <random>

#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

tensor random_input(shape s, double lo, double hi, uint32_t seed, bool random_sign = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  tensor t(dtype::f64, s);
  for (auto& v : t.flat<double>()) {
    v = d(rng);
    if (random_sign && (rng() & 1))
      v = -v;
  }
  return t;
}

using builder_fn = std::function<output(graph&, const std::vector<output>&)>;

/// Compares symbolic gradients of sum(f(xs) * w) with central differences, in float64.
void check_gradient(const builder_fn& f, std::vector<tensor> inputs, double tol = 1e-6,
                    double h = 1e-6) {
  graph g;
  std::vector<output> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "x"; // not "x" + string: GCC 12 warns falsely there (-Warray-bounds)
    name += std::to_string(i);
    xs.push_back(placeholder(g, dtype::f64, inputs[i].shape(), name));
  }
  output y = f(g, xs);
  REQUIRE(y.shape().is_fully_defined());
  auto w = constant(g, random_input(y.shape(), 0.5, 1.5, 99, true));
  output loss = sum(cast(y, dtype::f64) * w);
  auto grads = gradients({loss}, xs);
  session s(test_runtime(), g);
  feed_list feeds;
  for (size_t i = 0; i < inputs.size(); ++i)
    feeds.emplace_back(xs[i], inputs[i]);
  std::vector<output> fetch;
  for (auto& gr : grads) {
    REQUIRE(gr.valid());
    fetch.push_back(gr);
  }
  auto symbolic = s.run(feeds, fetch).value();
  for (size_t i = 0; i < inputs.size(); ++i) {
    REQUIRE(symbolic[i].shape() == inputs[i].shape());
    for (int64_t j = 0; j < inputs[i].num_elements(); ++j) {
      auto eval_at = [&](double delta) {
        auto f2 = feeds;
        tensor moved = inputs[i].copy();
        moved.data<double>()[j] += delta;
        f2[i].second = moved;
        return *s.run(f2, {loss}).value()[0].data<double>();
      };
      double numeric = (eval_at(h) - eval_at(-h)) / (2 * h);
      double got = symbolic[i].data<double>()[j];
      INFO("op " << y.node().op << ", input " << i << ", element " << j);
      CHECK(got == Approx(numeric).margin(tol).epsilon(tol > 1e-6 ? 1e-3 : 1e-4));
    }
  }
}

} // namespace

TEST_CASE("gradients of broadcasting binary ops match finite differences", "[ops]") {
  auto a = random_input({2, 3}, 0.5, 1.5, 1, true);
  auto row = random_input({3}, 0.5, 1.5, 2, true);
  auto col = random_input({2, 1}, 0.5, 1.5, 3, true);
  auto pos = random_input({2, 3}, 0.5, 1.5, 4);
  check_gradient([](graph&, auto& x) { return x[0] + x[1]; }, {a, row});
  check_gradient([](graph&, auto& x) { return x[0] - x[1]; }, {col, a});
  check_gradient([](graph&, auto& x) { return x[0] * x[1]; }, {a, col});
  check_gradient([](graph&, auto& x) { return x[0] / x[1]; }, {a, row});
  check_gradient([](graph&, auto& x) { return pow(x[0], x[1]); }, {pos, row});
  check_gradient([](graph&, auto& x) { return maximum(x[0], x[1]); }, {a, row});
  check_gradient([](graph&, auto& x) { return minimum(x[0], x[1]); }, {a, col});
  check_gradient([](graph&, auto& x) { return squared_difference(x[0], x[1]); }, {a, row});
  check_gradient([](graph&, auto& x) { return add_n({x[0], x[1], x[0]}); }, {a, pos});
  check_gradient([](graph&, auto& x) { return select(greater(x[0], x[1]), x[0], x[1] * 2.0); },
                 {a, pos});
}

TEST_CASE("gradients of unary ops match finite differences", "[ops]") {
  auto any = random_input({2, 3}, 0.2, 1.5, 5, true);
  auto pos = random_input({2, 3}, 0.2, 1.5, 6);
  // Every row of ops/core/unary_ops.hpp that has a gradient; the others are marked as having
  // none (Sign, Floor: piecewise constant).
  for (auto& u : unary_ops) {
    INFO("op " << u.name);
    if (builtin_gradients().is_non_differentiable(u.name))
      continue;
    REQUIRE(builtin_gradients().find(u.name) != nullptr);
    bool domain = u.op == unary_op::Log || u.op == unary_op::Log1p || u.op == unary_op::Sqrt ||
                  u.op == unary_op::Rsqrt || u.op == unary_op::Reciprocal;
    check_gradient([&](graph& g, auto& x) { return g.build(u.name, u.name, {x[0].ep()})[0]; },
                   {domain ? pos : any});
  }
  check_gradient([](graph&, auto& x) { return identity(x[0]); }, {any});
  check_gradient([](graph&, auto& x) { return print(x[0], "passing through: "); }, {any});
}

TEST_CASE("gradients of MatMul with every transpose", "[ops]") {
  auto a = random_input({2, 3}, 0.5, 1.5, 7, true);
  auto b = random_input({3, 4}, 0.5, 1.5, 8, true);
  auto at = random_input({3, 2}, 0.5, 1.5, 9, true);
  auto bt = random_input({4, 3}, 0.5, 1.5, 10, true);
  check_gradient([](graph&, auto& x) { return matmul(x[0], x[1]); }, {a, b});
  check_gradient([](graph&, auto& x) { return matmul(x[0], x[1], {true, false}); }, {at, b});
  check_gradient([](graph&, auto& x) { return matmul(x[0], x[1], {false, true}); }, {a, bt});
  check_gradient([](graph&, auto& x) { return matmul(x[0], x[1], {true, true}); }, {at, bt});
}

TEST_CASE("gradients of reductions and array ops", "[ops]") {
  auto a = random_input({2, 3, 2}, 0.5, 1.5, 11, true);
  check_gradient([](graph&, auto& x) { return sum(x[0], {1}); }, {a});
  check_gradient([](graph&, auto& x) { return sum(x[0], {0, 2}, true); }, {a});
  check_gradient([](graph&, auto& x) { return mean(x[0], {2}); }, {a});
  check_gradient([](graph&, auto& x) { return mean(x[0]); }, {a});
  check_gradient([](graph&, auto& x) { return reduce_max(x[0], {1}); }, {a});
  check_gradient([](graph&, auto& x) { return reduce_min(x[0], {0, 2}); }, {a});
  check_gradient([](graph&, auto& x) { return reduce_prod(x[0], {1}); }, {a});
  check_gradient([](graph&, auto& x) { return reshape(x[0], {3, 4}); }, {a});
  check_gradient([](graph&, auto& x) { return expand_dims(x[0], 1); }, {a});
  check_gradient([](graph&, auto& x) { return transpose(x[0], {2, 0, 1}); }, {a});
  auto b = random_input({2, 2, 2}, 0.5, 1.5, 12, true);
  check_gradient([](graph&, auto& x) { return concat({x[0], x[1]}, 1); }, {a, b});
  // Lengths along the axis unknown until the step runs (a state of unknown width, say).
  check_gradient(
      [](graph&, auto& x) {
        auto u0 = reshape(x[0], shape_of(x[0])), u1 = reshape(x[1], shape_of(x[1]));
        REQUIRE(u0.shape()[1] < 0);
        return reshape(concat({u0, u1}, 1), std::vector<int64_t>{2, 5, 2});
      },
      {a, b});
  auto p = random_input({4, 3}, 0.5, 1.5, 13, true);
  check_gradient([](graph& g, auto& x) { return gather(x[0], constant(g, {3, 0, 3, 1})); }, {p});
}

TEST_CASE("gradients of neural-network ops", "[ops]") {
  auto v = random_input({3, 4}, 0.5, 1.5, 14, true);
  auto bias = random_input({4}, 0.5, 1.5, 15, true);
  check_gradient([](graph&, auto& x) { return bias_add(x[0], x[1]); }, {v, bias});
  check_gradient([](graph&, auto& x) { return softmax(x[0]); }, {v});
  auto labels = random_input({3, 4}, 0.1, 1.0, 16);
  for (int r = 0; r < 3; ++r) { // labels are distributions, as the op requires
    double total = 0;
    for (int j = 0; j < 4; ++j)
      total += labels.data<double>()[r * 4 + j];
    for (int j = 0; j < 4; ++j)
      labels.data<double>()[r * 4 + j] /= total;
  }
  check_gradient(
      [&](graph& g, auto& x) {
        return softmax_cross_entropy_with_logits(x[0], constant(g, labels)).first;
      },
      {v});
  check_gradient(
      [](graph& g, auto& x) {
        return sparse_softmax_cross_entropy_with_logits(x[0], constant(g, {3, 0, 2})).first;
      },
      {v});
}

TEST_CASE("gradients: unconnected inputs, stop_gradient, missing gradients", "[ops]") {
  graph g;
  auto x = placeholder(g, dtype::f64, shape{2}, "x");
  auto z = placeholder(g, dtype::f64, shape{2}, "z");
  auto y = sum(x * 3.0 + stop_gradient(x * x));
  auto gs = gradients({y}, {x, z});
  REQUIRE(gs[0].valid());
  CHECK_FALSE(gs[1].valid());
  auto zs = gradients({y}, {z}, {}, {.unconnected_zeros = true});
  REQUIRE(zs[0].valid());
  auto r = eval({gs[0], zs[0]},
                {{x, tensor::vector<double>({1, 2})}, {z, tensor::vector<double>({5, 6})}});
  check_equal(r[0], tensor::vector<double>({3, 3})); // stop_gradient hid the x*x term
  check_equal(r[1], tensor::vector<double>({0, 0}));
  CHECK(gs[0].node().name.rfind("gradients/", 0) == 0);

  // A fed gradient of y scales the result.
  auto scaled = gradients({y}, {x}, {constant(g, 2.0)});
  check_equal(eval1(scaled[0], {{x, tensor::vector<double>({1, 2})}}),
              tensor::vector<double>({6, 6}));
}

TEST_CASE("gradients of Conv2D and pooling (float32, central differences)", "[ops]") {
  auto x = random_input({2, 5, 5, 3}, 0.1, 1.0, 21, true);
  auto f = random_input({3, 3, 3, 4}, 0.1, 1.0, 22, true);
  auto f32 = [](output o) { return cast(o, dtype::f32); };
  for (auto padding : {"SAME", "VALID"})
    for (int64_t stride : {1, 2})
      check_gradient(
          [&](graph&, auto& in) {
            return conv2d(f32(in[0]), f32(in[1]), {stride, stride}, padding);
          },
          {x, f}, 2e-3, 1e-2);
  // Cast is linear: float32 rounding is the only error, so a wide step is exact enough.
  check_gradient([&](graph&, auto& in) { return cast(f32(in[0]), dtype::f64) * 2.0; }, {x}, 2e-3,
                 1e-2);
  auto p = random_input({1, 4, 4, 2}, 0.1, 1.0, 23, true); // distinct values: no ties
  check_gradient(
      [&](graph&, auto& in) {
        return max_pool(f32(in[0]), {2, 2}, {2, 2});
      },
      {p}, 2e-3, 1e-3);
  check_gradient(
      [&](graph&, auto& in) {
        return avg_pool(f32(in[0]), {3, 3}, {1, 1}, "SAME");
      },
      {p}, 2e-3, 1e-2);
}
