#include <set>

#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/tests/ops/gradient_check.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("every op with a gradient has a finite-difference check", "[ops]") {
  std::set<std::string> checked;
  for (auto& c : gradient_cases())
    checked.insert(c.op);
  auto& reg = builtin_gradients();
  for (auto& op : reg.differentiable_ops()) {
    INFO(op << " has a gradient function and no check in tests/ops/gradient_cases.cpp");
    CHECK(checked.contains(op));
  }
  for (auto& op : checked) {
    INFO(op << " is checked in tests/ops/gradient_cases.cpp but has no gradient function");
    CHECK((reg.find(op) != nullptr || reg.find_sparse(op) != nullptr));
  }
  // Every row of the unary table is differentiable or marked as not (Sign, Floor).
  for (auto& u : unary_ops) {
    INFO("unary row " << u.name);
    CHECK((reg.find(u.name) != nullptr || reg.is_non_differentiable(u.name)));
  }
}

TEST_CASE("gradients of every op match finite differences", "[ops]") {
  for (auto& c : gradient_cases()) {
    INFO("the check of " << c.op);
    check_gradient(c.build, c.inputs, c.tol, c.h, c.op);
  }
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
