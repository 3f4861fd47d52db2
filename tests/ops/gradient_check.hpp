#pragma once
// Finite-difference checks of symbolic gradients, shared by the gradient tests.

#include <algorithm>
#include <functional>
#include <random>

#include "runnel/ops/grad/gradients.hpp"
#include "runnel/tests/eval.hpp"

namespace runnel::testing {

inline tensor random_input(shape s, double lo, double hi, uint32_t seed, bool random_sign = false) {
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

/// Compares symbolic gradients of sum(f(xs) * w) with central differences, in float64. With
/// `op` named, the graph f builds must hold a node of that op (a check cannot miss its op).
inline void check_gradient(const builder_fn& f, std::vector<tensor> inputs, double tol = 1e-6,
                           double h = 1e-6, const std::string& op = {}) {
  graph g;
  std::vector<output> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "x"; // not "x" + string: GCC 12 warns falsely there (-Warray-bounds)
    name += std::to_string(i);
    xs.push_back(placeholder(g, dtype::f64, inputs[i].shape(), name));
  }
  output y = f(g, xs);
  REQUIRE(y.shape().is_fully_defined());
  if (!op.empty()) {
    INFO("the graph built to check " << op << "'s gradient");
    REQUIRE(
        std::any_of(g.nodes().begin(), g.nodes().end(), [&](const node& n) { return n.op == op; }));
  }
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

/// One finite-difference check of `op`'s gradient: sum(build(inputs) * w) against central
/// differences with step h, to within tol.
struct gradient_case {
  std::string op;
  builder_fn build;
  std::vector<tensor> inputs;
  double tol = 1e-6;
  double h = 1e-6;
};

/// Every op's checks (tests/ops/gradient_cases.cpp), by family.
std::vector<gradient_case> gradient_cases();

} // namespace runnel::testing
