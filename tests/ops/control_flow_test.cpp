// cond and while_loop through the executor: frames, iterations, deadness, invariants,
// back-pressure, malformed graphs, timeouts, and that no per-iteration state outlives a step.
#include <chrono>
#include <set>
#include <thread>

#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/placement/dot.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

using vars = std::vector<output>;

/// Waits (bounded) until no frame or per-iteration input is held: aborted steps let go of their
/// state as their last messages drain.
int64_t settled_flow_state() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (control_flow_state_in_use() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  return control_flow_state_in_use();
}

/// sum of 0..n-1 by a loop (i, acc).
std::pair<output, output> sum_below(graph& g, output n, while_options options = {}) {
  auto zero = constant(g, int32_t(0));
  auto out = while_loop([&](const vars& v) { return less(v[0], n); },
                        [&](const vars& v) {
                          return vars{v[0] + constant(g, int32_t(1)), v[1] + v[0]};
                        },
                        {zero, zero}, options);
  return {out[0], out[1]};
}

} // namespace

TEST_CASE("cond runs the branch its predicate picks", "[actors][control_flow]") {
  graph g;
  auto p = placeholder(g, dtype::boolean, shape{}, "p");
  auto x = placeholder(g, dtype::f32, shape{2}, "x");
  auto y = cond(p, [&] { return x * 2.0; }, [&] { return x + 1.0; });
  session s(test_runtime(), g);
  auto xs = tensor::vector<float>({1, 2});
  check_equal(s.run({{p, tensor::scalar(true)}, {x, xs}}, {y}).value()[0],
              tensor::vector<float>({2, 4}));
  check_equal(s.run({{p, tensor::scalar(false)}, {x, xs}}, {y}).value()[0],
              tensor::vector<float>({2, 3}));
  CHECK(y.shape() == shape{2});
  CHECK(settled_flow_state() == 0);
}

TEST_CASE("cond: outer tensors returned as they are, several outputs, nesting",
          "[actors][control_flow]") {
  graph g;
  auto a = placeholder(g, dtype::i32, shape{}, "a");
  auto ten = constant(g, int32_t(10));
  // sign-like: a < 0 -> -1; a == 0 -> 0; else a itself (an outer tensor returned unchanged)
  auto r = cond(
      less(a, constant(g, int32_t(0))), [&] { return vars{constant(g, int32_t(-1)), ten}; },
      [&] {
        return vars{cond(equal(a, constant(g, int32_t(0))), [&] { return constant(g, int32_t(0)); },
                         [&] { return a; }),
                    ten + a};
      });
  session s(test_runtime(), g);
  for (int v : {-5, 0, 7}) {
    auto out = s.run({{a, tensor::scalar<int32_t>(v)}}, {r[0], r[1]}).value();
    CHECK(*out[0].data<int32_t>() == (v < 0 ? -1 : v));
    CHECK(*out[1].data<int32_t>() == (v < 0 ? 10 : 10 + v));
  }
  CHECK(settled_flow_state() == 0);
}

TEST_CASE("cond only runs the branch taken", "[actors][control_flow]") {
  graph g;
  auto p = placeholder(g, dtype::boolean, shape{}, "p");
  auto x = placeholder(g, dtype::f32, shape{-1}, "x");
  // The false branch would fail (a reshape to an impossible shape) if it ran.
  auto y = cond(p, [&] { return x * 3.0; },
                [&] { return reshape(x, constant(g, std::initializer_list<int32_t>{7, 7})); });
  session s(test_runtime(), g);
  auto r = s.run({{p, tensor::scalar(true)}, {x, tensor::vector<float>({1, 2})}}, {y});
  INFO((r.ok() ? std::string() : r.error().to_string()));
  REQUIRE(r.ok());
  check_equal(r.value()[0], tensor::vector<float>({3, 6}));
  auto bad = s.run({{p, tensor::scalar(false)}, {x, tensor::vector<float>({1, 2})}}, {y});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().to_string(), Catch::Contains("Reshape"));
  CHECK(settled_flow_state() == 0);
}

TEST_CASE("an update in a cond branch changes the variable itself, only when taken",
          "[actors][control_flow]") {
  graph g;
  auto p = placeholder(g, dtype::boolean, shape{}, "p");
  auto v = variable(g, constant(g, 0.0f), "v");
  auto w = variable(g, constant(g, 0.0f), "w");
  // A ref cannot pass a Switch: the AssignAdd reads the variable directly and waits on the
  // branch's pivot; the other branch assigns w, so each step changes exactly one of them.
  auto out = cond(
      p, [&] { return assign_add(v, constant(g, 1.0f)); },
      [&] { return assign(w, v.value * 10.0f); });
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  for (bool taken : {true, false, true, true, false}) {
    auto r = s.run({{p, tensor::scalar(taken)}}, {out});
    INFO((r.ok() ? std::string() : r.error().to_string()));
    REQUIRE(r.ok());
  }
  auto r = s.run({}, {v.value, w.value});
  REQUIRE(r.ok());
  check_equal(r.value()[0], tensor::scalar(3.0f));
  check_equal(r.value()[1], tensor::scalar(30.0f));
}

TEST_CASE("case_of and switch_case pick one branch", "[actors][control_flow]") {
  graph g;
  auto i = placeholder(g, dtype::i32, shape{}, "i");
  std::vector<branch_fn> branches;
  for (int k = 0; k < 4; ++k)
    branches.push_back([&g, k] { return vars{constant(g, float(k * 10))}; });
  auto r = switch_case(i, branches)[0];
  session s(test_runtime(), g);
  for (int k : {0, 1, 2, 3, 9, -1}) {
    auto v = *s.run({{i, tensor::scalar<int32_t>(k)}}, {r}).value()[0].data<float>();
    CHECK(v == float((k >= 0 && k < 3 ? k : 3) * 10)); // out of range: the last branch
  }
}

TEST_CASE("while_loop sums, for zero and many iterations, with any parallelism",
          "[actors][control_flow]") {
  graph g;
  auto n = placeholder(g, dtype::i32, shape{}, "n");
  auto serial = sum_below(g, n, {.parallel_iterations = 1});
  auto wide = sum_below(g, n, {.parallel_iterations = 32});
  session s(test_runtime(), g);
  for (int v : {0, 1, 5, 1000}) {
    auto out = s.run({{n, tensor::scalar<int32_t>(v)}},
                     {serial.first, serial.second, wide.first, wide.second})
                   .value();
    CHECK(*out[0].data<int32_t>() == v);
    CHECK(*out[1].data<int32_t>() == v * (v - 1) / 2);
    CHECK(*out[2].data<int32_t>() == v);
    CHECK(*out[3].data<int32_t>() == v * (v - 1) / 2);
  }
  CHECK(settled_flow_state() == 0);
}

TEST_CASE("while_loop: loop invariants, tensors with shapes, concurrent steps",
          "[actors][control_flow]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{3}, "x");
  auto w = placeholder(g, dtype::f32, shape{3}, "w"); // used inside: a loop invariant
  auto out = while_loop(
      [&](const vars& v) { return less(v[0], constant(g, int32_t(4))); },
      [&](const vars& v) { return vars{v[0] + constant(g, int32_t(1)), v[1] * w + 1.0}; },
      {constant(g, int32_t(0)), x});
  session s(test_runtime(), g);
  std::vector<std::future<result<std::vector<tensor>>>> runs;
  for (int k = 0; k < 8; ++k)
    runs.push_back(s.run_async({{x, tensor::vector<float>({1, float(k), 0})},
                                {w, tensor::vector<float>({2, 1, 0.5f})}},
                               {out[1]}));
  for (int k = 0; k < 8; ++k) {
    auto r = runs[size_t(k)].get();
    REQUIRE(r.ok());
    // x -> x*w + 1, four times
    float a = 1, b = float(k), c = 0;
    for (int it = 0; it < 4; ++it) {
      a = a * 2 + 1;
      b = b * 1 + 1;
      c = c * 0.5f + 1;
    }
    check_equal(r.value()[0], tensor::vector<float>({a, b, c}));
  }
  CHECK(out[1].shape() == shape{3});
  CHECK(settled_flow_state() == 0);
}

TEST_CASE("nested loops and a loop in a cond and a cond in a loop", "[actors][control_flow]") {
  graph g;
  auto n = placeholder(g, dtype::i32, shape{}, "n");
  auto one = constant(g, int32_t(1));
  // count = sum over i < n of (number of j < i)  = n(n-1)/2, by two nested loops
  auto outer = while_loop(
      [&](const vars& v) { return less(v[0], n); },
      [&](const vars& v) {
        auto i = v[0];
        auto inner = while_loop([&](const vars& u) { return less(u[0], i); },
                                [&](const vars& u) { return vars{u[0] + one, u[1] + one}; },
                                {constant(g, int32_t(0)), v[1]});
        return vars{i + one, inner[1]};
      },
      {constant(g, int32_t(0)), constant(g, int32_t(0))});
  // even numbers below n, summed by a loop whose body branches
  auto evens = while_loop(
      [&](const vars& v) { return less(v[0], n); },
      [&](const vars& v) {
        auto is_even = equal(v[0] - (v[0] / constant(g, int32_t(2))) * constant(g, int32_t(2)),
                             constant(g, int32_t(0)));
        auto acc = cond(is_even, [&] { return v[1] + v[0]; }, [&] { return v[1]; });
        return vars{v[0] + one, acc};
      },
      {constant(g, int32_t(0)), constant(g, int32_t(0))});
  // a loop that runs only when n > 3
  auto guarded = cond(
      less(constant(g, int32_t(3)), n),
      [&] {
        return while_loop([&](const vars& v) { return less(v[0], n); },
                          [&](const vars& v) { return vars{v[0] + one}; },
                          {constant(g, int32_t(0))})[0];
      },
      [&] { return constant(g, int32_t(-1)); });
  session s(test_runtime(), g);
  for (int v : {0, 3, 6}) {
    auto out = s.run({{n, tensor::scalar<int32_t>(v)}}, {outer[1], evens[1], guarded}).value();
    CHECK(*out[0].data<int32_t>() == v * (v - 1) / 2);
    int even_sum = 0;
    for (int k = 0; k < v; k += 2)
      even_sum += k;
    CHECK(*out[1].data<int32_t>() == even_sum);
    CHECK(*out[2].data<int32_t>() == (v > 3 ? v : -1));
  }
  CHECK(settled_flow_state() == 0);
}

TEST_CASE("maximum_iterations ends a loop, and shape invariants let a shape vary",
          "[actors][control_flow]") {
  graph g;
  auto forever = while_loop([&](const vars&) { return constant(g, true); },
                            [&](const vars& v) { return vars{v[0] + 1.0}; },
                            {constant(g, 0.0f)}, {.maximum_iterations = 25});
  // A vector that grows by one element per iteration.
  auto grown = while_loop(
      [&](const vars& v) { return less(v[0], constant(g, int32_t(5))); },
      [&](const vars& v) {
        return vars{v[0] + constant(g, int32_t(1)),
                    concat({v[1], constant(g, {1.0f})}, 0)};
      },
      {constant(g, int32_t(0)), constant(g, {0.0f})},
      {.shape_invariants = {shape{}, shape{-1}}});
  auto out = eval({forever[0], grown[1]});
  CHECK(*out[0].data<float>() == 25);
  CHECK(out[1].shape() == shape{6});
  CHECK(grown[1].shape() == shape{-1});
}

TEST_CASE("while_loop refuses what would go wrong, naming the loop variable or the nodes",
          "[actors][control_flow]") {
  graph g;
  auto x = constant(g, {1.0f, 2.0f}, "x");
  CHECK_THROWS_WITH(
      while_loop([&](const vars& v) { return less(v[0], constant(g, int32_t(3))); },
                 [&](const vars& v) {
                   return vars{v[0] + constant(g, int32_t(1)), concat({v[1], v[1]}, 0)};
                 },
                 {constant(g, int32_t(0)), x}),
      Catch::Contains("loop variable 1 ('x')") && Catch::Contains("shape_invariants"));
  CHECK_THROWS_WITH(while_loop([&](const vars& v) { return v[0]; },
                               [&](const vars& v) { return vars{v[0], v[0]}; },
                               {constant(g, true)}),
                    Catch::Contains("returns 2 tensors for 1 loop variables"));
  CHECK_THROWS_WITH(while_loop([&](const vars& v) { return v[0] + 1.0; },
                               [&](const vars& v) { return v; }, {constant(g, 0.0f)}),
                    Catch::Contains("must be a bool scalar"));
  // A tensor made in a loop body, used after the loop: the error names both and the frame.
  output leaked;
  while_loop([&](const vars& v) { return less(v[0], constant(g, int32_t(3))); },
             [&](const vars& v) {
               leaked = v[0] * constant(g, int32_t(2), "doubled_factor");
               return vars{v[0] + constant(g, int32_t(1))};
             },
             {constant(g, int32_t(0))}, {.name = "counter"});
  CHECK_THROWS_WITH(leaked + constant(g, int32_t(1)),
                    Catch::Contains(leaked.node().name) && Catch::Contains("while loop 'counter'") &&
                        Catch::Contains("counter/while_context"));
}

TEST_CASE("a TensorFlow v1 while loop written as nodes runs", "[actors][control_flow]") {
  // What tf.while_loop(lambda i: i < 10, lambda i: i + 1, [0]) writes, Merge before its
  // NextIteration as in TensorFlow's GraphDefs.
  graph g;
  auto def = [&](std::string name, std::string op, std::vector<std::string> inputs,
                 attr_map attrs = {}) {
    auto added = g.add_node({name, op, std::move(inputs), "", std::move(attrs)});
    INFO(name << ": " << (added.ok() ? std::string() : added.error().to_string()));
    REQUIRE(added.ok());
  };
  def("Const", "Const", {}, {{"dtype", dtype::i32}, {"value", tensor::scalar<int32_t>(0)}});
  def("while/Enter", "Enter", {"Const"},
      {{"T", dtype::i32}, {"frame_name", std::string("while/while_context")}});
  def("while/Merge", "Merge", {"while/Enter", "while/NextIteration"},
      {{"T", dtype::i32}, {"N", int64_t(2)}});
  def("while/Less/y", "Const", {"^while/Merge"},
      {{"dtype", dtype::i32}, {"value", tensor::scalar<int32_t>(10)}});
  def("while/Less", "Less", {"while/Merge", "while/Less/y"}, {{"T", dtype::i32}});
  def("while/LoopCond", "LoopCond", {"while/Less"});
  def("while/Switch", "Switch", {"while/Merge", "while/LoopCond"}, {{"T", dtype::i32}});
  def("while/Identity", "Identity", {"while/Switch:1"}, {{"T", dtype::i32}});
  def("while/add/y", "Const", {"^while/Identity"},
      {{"dtype", dtype::i32}, {"value", tensor::scalar<int32_t>(1)}});
  def("while/add", "Add", {"while/Identity", "while/add/y"}, {{"T", dtype::i32}});
  def("while/NextIteration", "NextIteration", {"while/add"}, {{"T", dtype::i32}});
  def("while/Exit", "Exit", {"while/Switch"}, {{"T", dtype::i32}});
  REQUIRE(g.check_complete().ok());
  auto exit = output(&g, g.find_endpoint("while/Exit").value());
  CHECK(*eval1(exit).data<int32_t>() == 10);
}

TEST_CASE("malformed control flow is refused at the first run, naming the nodes",
          "[actors][control_flow]") {
  graph g;
  auto x = constant(g, 1.0f, "x");
  auto exit = g.build("Exit", "lonely_exit", {x.ep()})[0];
  CHECK_THAT(eval_error(exit).to_string(), Catch::Contains("lonely_exit") &&
                                                Catch::Contains("not inside a loop"));
  auto next = g.build("NextIteration", "stray_next", {x.ep()})[0];
  CHECK_THAT(eval_error(next).to_string(), Catch::Contains("stray_next"));
  // Two loops' tensors meeting in one node: inputs from different frames.
  auto a = g.build("Enter", "enter_a", {x.ep()}, {{"frame_name", std::string("A")}})[0];
  auto b = g.build("Enter", "enter_b", {x.ep()}, {{"frame_name", std::string("B")}})[0];
  auto sum = a + b;
  CHECK_THAT(eval_error(sum).to_string(), Catch::Contains("different frames") &&
                                               Catch::Contains("enter_a") &&
                                               Catch::Contains("enter_b"));
  // A fetch on a branch not taken has no value.
  auto sw = g.build("Switch", "switch", {x.ep(), constant(g, false).ep()});
  CHECK_THAT(eval_error(identity(sw[1], "untaken")).to_string(),
             Catch::Contains("untaken") && Catch::Contains("no value"));
  CHECK(settled_flow_state() == 0);
}

TEST_CASE("a loop that never ends is stopped by the step's timeout and leaves nothing behind",
          "[actors][control_flow]") {
  graph g;
  auto out = while_loop([&](const vars&) { return constant(g, true); },
                        [&](const vars& v) { return vars{v[0] + 1.0}; }, {constant(g, 0.0f)});
  session s(test_runtime(), g);
  auto r = s.run({}, {out[0]}, {}, {.timeout = std::chrono::milliseconds(200)}, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::deadline_exceeded);
  CHECK(settled_flow_state() == 0);
  // The session still works for other steps.
  graph g2;
  auto n = constant(g2, int32_t(100));
  auto fine = sum_below(g2, n);
  CHECK(*eval1(fine.second).data<int32_t>() == 4950);
}

TEST_CASE("a loop spans devices: iterations pipeline across two CPU devices",
          "[actors][control_flow]") {
  runtime rt(runtime_options{.cpu_devices = 2});
  graph g;
  auto x = placeholder(g, dtype::f32, shape{4}, "x");
  auto out = while_loop(
      [&](const vars& v) { return less(v[0], constant(g, int32_t(50))); },
      [&](const vars& v) {
        output a, b;
        {
          auto d = g.device("/device:cpu:0");
          a = v[1] * 0.5;
        }
        {
          auto d = g.device("/device:cpu:1");
          b = a + 1.0;
        }
        return vars{v[0] + constant(g, int32_t(1)), b};
      },
      {constant(g, int32_t(0)), x});
  session s(rt, g);
  auto r = s.run({{x, tensor::vector<float>({0, 2, 4, 8})}}, {out[1]}).value();
  // x -> x/2 + 1 converges to 2
  check_close(r[0], tensor::vector<float>({2, 2, 2, 2}), 1e-4, 1e-4);
  CHECK(settled_flow_state() == 0);
}

TEST_CASE("traces give each loop node's frame and iteration, and dot draws frames as clusters",
          "[actors][control_flow]") {
  graph g;
  auto n = constant(g, int32_t(3));
  auto sums = sum_below(g, n, {.name = "loop"});
  session s(test_runtime(), g);
  run_metadata md;
  REQUIRE(s.run({}, {sums.second}, {}, {.trace = true}, &md).ok());
  std::set<int64_t> iterations;
  for (auto& t : md.nodes)
    if (t.op == "Add" && t.frame == "loop/while_context")
      iterations.insert(t.iteration);
  CHECK(iterations == std::set<int64_t>{0, 1, 2});
  for (auto& t : md.nodes)
    if (t.op == "Exit" || t.node == "Const")
      CHECK(t.frame.empty());
  auto json = md.to_chrome_trace();
  CHECK_THAT(json, Catch::Contains("\"frame\":\"loop/while_context\",\"iteration\":2"));

  auto dot = to_dot(g);
  CHECK_THAT(dot, Catch::Contains("subgraph cluster_frame1 {") &&
                      Catch::Contains("label=\"frame loop/while_context\"") &&
                      Catch::Contains("constraint=false"));
  // The loop's Add is inside the cluster, the Exit outside it.
  auto cluster = dot.substr(dot.find("subgraph cluster_frame1"));
  cluster = cluster.substr(0, cluster.find("\n  }\n"));
  CHECK_THAT(cluster, Catch::Contains("\\nAdd\"") && !Catch::Contains("\\nExit\""));
}

namespace {

/// acc over i < n: (nested: plus the sum of j < i, by an inner loop) plus i when i is odd (by a
/// cond), with `parallel` iterations at once; and the value it must give.
output odd_loop(graph& g, output n, int parallel, bool nested) {
  auto one = constant(g, int32_t(1));
  auto out = while_loop(
      [&](const vars& v) { return less(v[0], n); },
      [&](const vars& v) {
        output acc = v[1];
        if (nested)
          acc = while_loop([&](const vars& u) { return less(u[0], v[0]); },
                           [&](const vars& u) {
                             return vars{u[0] + one, u[1] + u[0]};
                           },
                           {constant(g, int32_t(0)), v[1]})[1];
        auto odd = equal(v[0] - (v[0] / constant(g, int32_t(2))) * constant(g, int32_t(2)), one);
        return vars{v[0] + one, cond(
                                    odd, [&] { return acc + v[0]; }, [&] { return acc; })};
      },
      {constant(g, int32_t(0)), constant(g, int32_t(0))}, {.parallel_iterations = parallel});
  return out[1];
}

int32_t odd_loop_value(int32_t n, bool nested) {
  int32_t acc = 0;
  for (int32_t i = 0; i < n; ++i)
    acc += (nested ? i * (i - 1) / 2 : 0) + (i % 2 == 1 ? i : 0);
  return acc;
}

} // namespace

TEST_CASE("a loop with a cond in its body goes on when a dead branch's last message ends the "
          "oldest iteration of a full window",
          "[actors][control_flow]") {
  // With one iteration at a time, the next iteration's messages wait (parked) until the current
  // one ends; here it ended on a Merge taking the untaken branch's dead value, and the next
  // iteration's messages were dropped: the step hung.
  graph g;
  auto n = placeholder(g, dtype::i32, shape{}, "n");
  auto out = odd_loop(g, n, 1, false);
  for (bool inline_firing : {true, false}) {
    session s(test_runtime(), g, {.inline_firing = inline_firing});
    for (int32_t k : {0, 1, 2, 3, 7}) {
      auto r = s.run({{n, tensor::scalar<int32_t>(k)}}, {out});
      REQUIRE(r.ok());
      CHECK(*r.value()[0].data<int32_t>() == odd_loop_value(k, false));
    }
  }
  CHECK(settled_flow_state() == 0);
}

TEST_CASE("loop nodes fire inline in their producers' turns: the same results as through "
          "messages with steps in flight, nested loops and conds, and every node traced",
          "[actors][control_flow]") {
  // Nodes waiting for several inputs (a Less with an invariant, a Switch, an Add of two loop
  // variables) take them under a lock when producers deliver inline; the results must be those
  // of the same graph with every firing a message, with many steps and iterations in flight.
  graph g;
  auto n = placeholder(g, dtype::i32, shape{}, "n");
  auto out = odd_loop(g, n, 4, true);
  session inline_s(test_runtime(), g);
  session messages(test_runtime(), g, {.inline_firing = false});
  for (session* s : {&inline_s, &messages}) {
    std::vector<std::future<result<std::vector<tensor>>>> runs;
    for (int32_t k = 0; k < 24; ++k)
      runs.push_back(s->run_async({{n, tensor::scalar<int32_t>(k)}}, {out}));
    for (int32_t k = 0; k < 24; ++k) {
      auto r = runs[size_t(k)].get();
      REQUIRE(r.ok());
      CHECK(*r.value()[0].data<int32_t>() == odd_loop_value(k, true));
    }
  }
  run_metadata md;
  REQUIRE(inline_s.run({{n, tensor::scalar<int32_t>(6)}}, {out}, {}, {.trace = true}, &md));
  std::set<int64_t> iterations; // of the loops' Adds, as traced
  for (auto& t : md.nodes)
    if (t.op == "Add" && !t.frame.empty())
      iterations.insert(t.iteration);
  CHECK(iterations == std::set<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(settled_flow_state() == 0);
}

TEST_CASE("loop invariants are bound once per frame: one that arrives after the loop started "
          "is read by every iteration, through conds too",
          "[actors][control_flow]") {
  // The Less of i < n and the body's Add read n and `slow` once per frame from the frame's state
  // instead of by a message per iteration; `slow` comes at the end of a chain, so the loop's
  // other Enters are in first and the frame's messages wait for it. A cond in the body takes it
  // through a Switch, dead in the iterations where the other branch runs.
  graph g;
  auto n = placeholder(g, dtype::i32, shape{}, "n");
  auto w = placeholder(g, dtype::f32, shape{3}, "w");
  auto one = placeholder(g, dtype::f32, shape{}, "one");
  output slow = w;
  for (int k = 0; k < 200; ++k)
    slow = slow + one;
  for (int parallel : {1, 10}) {
    auto out =
        while_loop([&](const vars& v) { return less(v[0], n); },
                   [&](const vars& v) {
                     auto even =
                         equal(floor_mod(v[0], constant(g, int32_t(2))), constant(g, int32_t(0)));
                     auto next = cond(
                         even, [&] { return v[1] * 0.5 + slow; }, [&] { return v[1] - 1.0; });
                     return vars{v[0] + constant(g, int32_t(1)), next};
                   },
                   {constant(g, int32_t(0)), w}, {.parallel_iterations = parallel});
    for (bool inline_firing : {true, false}) {
      session s(test_runtime(), g, {.inline_firing = inline_firing});
      for (int32_t k : {0, 1, 2, 5}) {
        std::vector<float> w0{1, -2, 0.5f}, acc = w0;
        for (int32_t i = 0; i < k; ++i)
          for (size_t j = 0; j < 3; ++j)
            acc[j] = i % 2 == 0 ? acc[j] * 0.5f + (w0[j] + 200 * 0.25f) : acc[j] - 1;
        auto r = s.run({{n, tensor::scalar<int32_t>(k)},
                        {w, tensor::vector<float>(w0)},
                        {one, tensor::scalar<float>(0.25f)}},
                       {out[1]});
        INFO("parallel_iterations " << parallel << ", inline " << inline_firing << ", n " << k);
        REQUIRE(r.ok());
        check_close(r.value()[0], tensor::vector<float>(acc));
      }
    }
  }
  CHECK(settled_flow_state() == 0);
}
