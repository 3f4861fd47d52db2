#include <thread>

#include "runnel/actors/state/freeze.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("reading an uninitialized variable is failed_precondition naming it", "[actors]") {
  runtime rt;
  graph g;
  auto w = variable(g, zeros(g, dtype::f32, {2}), "weights");
  auto y = w.value * 2.0;
  session s(rt, g);
  auto r = s.run({}, {y});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::failed_precondition);
  CHECK(r.error().message().find("uninitialized value weights") != std::string::npos);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  check_equal(s.run({}, {y}).value()[0], tensor::vector<float>({0, 0}));
}

TEST_CASE("variables persist across runs and sessions of one runtime", "[actors]") {
  runtime rt;
  graph g;
  auto v = variable(g, constant(g, {1.f, 2.f}), "v");
  auto inc = assign_add(v, constant(g, {1.f, 1.f}));
  auto dec = assign_sub(v, constant(g, {0.5f, 0.5f}));
  auto set = assign(v, constant(g, {10.f, 20.f}));
  {
    session s(rt, g);
    REQUIRE(s.run({global_variables_initializer(g)}).ok());
    check_equal(s.run({}, {inc}).value()[0], tensor::vector<float>({2, 3}));
    REQUIRE(s.run({inc}).ok());
    check_equal(s.run({}, {v.value}).value()[0], tensor::vector<float>({3, 4}));
  }
  {
    session s2(rt, g); // a new session sees the same variable
    check_equal(s2.run({}, {v.value}).value()[0], tensor::vector<float>({3, 4}));
    check_equal(s2.run({}, {dec}).value()[0], tensor::vector<float>({2.5f, 3.5f}));
    check_equal(s2.run({}, {set}).value()[0], tensor::vector<float>({10, 20}));
  }
  runtime other;
  session s3(other, g); // another runtime has its own state
  CHECK(s3.run({}, {v.value}).error().code() == error_code::failed_precondition);
}

TEST_CASE("reads are snapshots: a later update does not change a fetched value", "[actors]") {
  runtime rt;
  graph g;
  auto v = variable(g, constant(g, {1.f}), "v");
  auto inc = assign_add(v, constant(g, {1.f}));
  session s(rt, g);
  REQUIRE(s.run({v.initializer}).ok());
  auto before = s.run({}, {v.value}).value()[0];
  REQUIRE(s.run({inc}).ok());
  check_equal(before, tensor::vector<float>({1}));
  check_equal(s.run({}, {v.value}).value()[0], tensor::vector<float>({2}));
}

TEST_CASE("concurrent updates are serialised at the variable's actor", "[actors]") {
  runtime rt;
  graph g;
  auto v = variable(g, constant(g, int64_t(0)), "counter");
  auto inc = assign_add(v, constant(g, int64_t(1)));
  session s(rt, g, {.max_in_flight_steps = 16});
  REQUIRE(s.run({v.initializer}).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      std::vector<std::future<result<std::vector<tensor>>>> fs;
      for (int i = 0; i < 250; ++i)
        fs.push_back(s.run_async({}, {}, {inc}));
      for (auto& f : fs)
        REQUIRE(f.get().ok());
    });
  for (auto& t : threads)
    t.join();
  check_equal(s.run({}, {v.value}).value()[0], tensor::scalar<int64_t>(1000));
}

TEST_CASE("assign checks dtype and shape against the variable", "[actors]") {
  runtime rt;
  graph g;
  auto v = variable(g, dtype::f32, shape{2}, "v");
  auto x = placeholder(g, dtype::f32, shape::unknown(), "x");
  auto a = assign(v, x, "set_v");
  session s(rt, g);
  auto r = s.run({{x, tensor::vector<float>({1, 2, 3})}}, {a});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("node 'set_v' (op Assign): cannot assign a value of shape [3] to "
                                 "variable v of shape [2]") != std::string::npos);
  check_equal(s.run({{x, tensor::vector<float>({1, 2})}}, {a}).value()[0],
              tensor::vector<float>({1, 2}));
  // The same variable name with another dtype is refused.
  graph g2;
  auto w = variable(g2, dtype::i32, shape{2}, "v");
  session s2(rt, g2);
  auto e = s2.run({}, {w.value});
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message().find("variable v already exists as float32[2]") != std::string::npos);
}

TEST_CASE("freeze_graph turns variables into constants holding their current values",
          "[actors][freeze]") {
  runtime rt;
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1}, "x");
  auto w = variable(g, constant(g, 3.0f), "freeze_w");
  auto b = variable(g, constant(g, 1.0f), "freeze_b");
  [[maybe_unused]] auto y = identity(x * w.value + b.value, "y");
  auto bump = assign(w, constant(g, 5.0f)); // trained: w is no longer its initial value
  session s(rt, g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  REQUIRE(s.run({bump}).ok());
  graph frozen;
  freeze_stats st;
  REQUIRE(freeze_graph(s, g, {"y"}, frozen, &st).ok());
  CHECK(st.variables == 2);
  CHECK(st.constant_bytes == 8);
  for (auto& n : frozen.nodes())
    CHECK(n.op != "VariableV2");
  // A fresh runtime: no checkpoint, no initialisation.
  runtime other;
  session served(other, frozen);
  auto r = served.run(named_feed_list{{"x", tensor::vector<float>({1, 2})}}, {"y"});
  REQUIRE(r.ok());
  check_equal(r.value()[0], tensor::vector<float>({6, 11}));
  // A training step is refused, naming the node that changes state.
  graph again;
  auto refused = freeze_graph(s, g, {bump.name()}, again);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.message().find(bump.name()) != std::string::npos);
  CHECK(freeze_graph(s, g, {"no_such_node"}, again).code() == error_code::not_found);
}

TEST_CASE("a variable assigned memory on loan keeps a copy and gives the loan back at once",
          "[actors]") {
  // As a ps assigns a worker's initial value lent from the shared-memory ring: kept, it would
  // hold up every later payload of that ring until the variable's next update copied it.
  runtime rt;
  graph g;
  auto x = placeholder(g, dtype::f32, shape{3}, "x");
  auto v = variable(g, zeros(g, dtype::f32, {3}), "v");
  auto set = assign(v, x);
  session s(rt, g);
  std::vector<float> memory = {1, 2, 3};
  bool given_back = false;
  tensor lent = tensor::on_loan(
      dtype::f32, shape{3}, memory.data(), [](void* c) { *static_cast<bool*>(c) = true; },
      &given_back);
  CHECK(lent.is_on_loan());
  CHECK(lent.keep_a_copy());
  REQUIRE(s.run({{x, lent}}, {}, {set}).ok());
  lent = tensor();
  CHECK(given_back);  // the variable did not keep the loan
  memory = {7, 7, 7}; // and what the lender does with it now
  check_equal(s.run({}, {v.value}).value()[0], tensor::vector<float>({1, 2, 3})); // is not seen
}
