#include <random>
#include <map>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <thread>

#include "runnel/placement/cost_model.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("a session runs a graph and reuses its instance per signature", "[actors]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1}, "x");
  auto y = x * 2.0;
  auto z = y + 1.0;
  session s(test_runtime(), g);
  for (int i = 0; i < 5; ++i) {
    auto r = s.run({{x, tensor::vector<float>({float(i), 1})}}, {z}).value();
    check_equal(r[0], tensor::vector<float>({2.f * float(i) + 1, 3}));
  }
  CHECK(s.num_instances() == 1);
  auto both = s.run({{x, tensor::vector<float>({1})}}, {y, z}).value();
  check_equal(both[0], tensor::vector<float>({2}));
  CHECK(s.num_instances() == 2);
  // Fetching a fed tensor returns the fed value.
  auto fed = s.run({{y, tensor::vector<float>({10})}}, {y, z}).value();
  check_equal(fed[0], tensor::vector<float>({10}));
  check_equal(fed[1], tensor::vector<float>({11}));
}

TEST_CASE("pruning: a node nobody needs never runs", "[actors]") {
  graph g;
  auto counter = variable(g, constant(g, 0), "counter");
  auto bump = assign_add(counter, constant(g, 1), "bump"); // a side effect nobody asks for
  auto value = constant(g, 5) + 1.0;
  session s(test_runtime(), g);
  REQUIRE(s.run({counter.initializer}).ok());
  for (int i = 0; i < 3; ++i)
    check_equal(s.run({}, {value}).value()[0], tensor::scalar<int32_t>(6));
  check_equal(s.run({}, {counter.value}).value()[0], tensor::scalar<int32_t>(0));
  REQUIRE(s.run({bump}).ok());
  check_equal(s.run({}, {counter.value}).value()[0], tensor::scalar<int32_t>(1));
  // Feeding an input cuts the graph above it: the placeholder need not be fed.
  auto x = placeholder(g, dtype::f32, shape{}, "x");
  auto y = x + 1.0;
  auto z = y * 3.0;
  check_equal(s.run({{y, tensor::scalar<float>(2)}}, {z}).value()[0], tensor::scalar<float>(6));
}

TEST_CASE("feed and fetch errors are clear", "[actors]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, 2}, "x");
  auto y = x * 2.0;
  session s(test_runtime(), g);
  auto unfed = s.run({}, {y});
  REQUIRE_FALSE(unfed.ok());
  CHECK(unfed.error().message() ==
        "you must feed a value for placeholder 'x' with dtype float32 and shape [?,2]");
  auto wrong_type = s.run({{x, vals<int32_t>({1, 2}, {1, 2})}}, {y});
  REQUIRE_FALSE(wrong_type.ok());
  CHECK(wrong_type.error().message() ==
        "feed 'x' expects a float32 tensor of shape [?,2], got int32[1,2]");
  auto wrong_shape = s.run({{x, vals<float>({1, 3}, {1, 2, 3})}}, {y});
  REQUIRE_FALSE(wrong_shape.ok());
  CHECK(wrong_shape.error().message().find("got float32[1,3]") != std::string::npos);
  auto missing = s.run(named_feed_list{}, {"nope:0"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == error_code::not_found);
  CHECK(missing.error().message() == "fetch 'nope:0': no node named 'nope' in the graph");
  auto bad_index = s.run(named_feed_list{{"x", vals<float>({1, 2}, {1, 2})}}, {"Mul:1"});
  REQUIRE_FALSE(bad_index.ok());
  CHECK(bad_index.error().code() == error_code::out_of_range);
  auto by_name = s.run(named_feed_list{{"x:0", vals<float>({1, 2}, {1, 2})}}, {"Mul"}).value();
  check_equal(by_name[0], vals<float>({1, 2}, {2, 4}));
  auto target = s.run(named_feed_list{}, {}, {"nothing"});
  CHECK(target.error().code() == error_code::not_found);
}

TEST_CASE("a kernel error aborts only its step and the session stays usable", "[actors]") {
  graph g;
  auto d = placeholder(g, dtype::i32, shape{}, "d");
  auto q = div(constant(g, 10), d, "q");
  auto big = matmul(constant(g, vals<float>({64, 64}, std::vector<float>(4096, 1.f))),
                    constant(g, vals<float>({64, 64}, std::vector<float>(4096, 1.f))));
  session s(test_runtime(), g);
  for (int round = 0; round < 3; ++round) {
    auto bad = s.run({{d, tensor::scalar<int32_t>(0)}}, {q, big});
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message() == "node 'q' (op Div): integer division by zero");
    auto good = s.run({{d, tensor::scalar<int32_t>(5)}}, {q, big}).value();
    check_equal(good[0], tensor::scalar<int32_t>(2));
    CHECK(good[1].data<float>()[0] == 64.f);
  }
}

TEST_CASE("concurrent runs from several threads all get their own results", "[actors]") {
  graph g;
  auto x = placeholder(g, dtype::i64, shape{}, "x");
  auto y = (x * 3.0 + 1.0) * 2.0 - x;
  session s(test_runtime(), g, {.max_in_flight_steps = 4});
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t i = 0; i < 300; ++i) {
        int64_t v = t * 1000 + i;
        auto r = s.run({{x, tensor::scalar<int64_t>(v)}}, {y});
        if (!r.ok())
          ++failed;
        else if (*r.value()[0].data<int64_t>() != (v * 3 + 1) * 2 - v)
          ++wrong;
      }
    });
  for (auto& th : threads)
    th.join();
  CHECK(failed == 0);
  CHECK(wrong == 0);
  CHECK(s.num_instances() == 1);
}

TEST_CASE("run_async returns futures, and many steps may be in flight", "[actors]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{}, "x");
  auto y = square(x);
  session s(test_runtime(), g, {.max_in_flight_steps = 8});
  std::vector<std::future<result<std::vector<tensor>>>> futures;
  for (int i = 0; i < 100; ++i)
    futures.push_back(s.run_async({{x, tensor::scalar<float>(float(i))}}, {y}));
  for (int i = 0; i < 100; ++i) {
    REQUIRE(futures[size_t(i)].wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    auto r = futures[size_t(i)].get();
    REQUIRE(r.ok());
    CHECK(*r.value()[0].data<float>() == float(i * i));
  }
  auto err = s.run_async({}, {y}).get();
  CHECK(err.error().code() == error_code::invalid_argument);
}

TEST_CASE("close stops the session, and later runs are cancelled", "[actors]") {
  graph g;
  auto y = constant(g, 1.f) + 1.0;
  session s(test_runtime(), g);
  REQUIRE(s.run({}, {y}).ok());
  s.close();
  CHECK(s.closed());
  auto r = s.run({}, {y});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::cancelled);
  s.close(); // idempotent
}

TEST_CASE("control dependencies order side effects", "[actors]") {
  graph g;
  auto v = variable(g, constant(g, 1), "v");
  auto doubled = assign(v, v.value * 2.0);
  output after;
  {
    auto deps = g.control_dependencies({doubled});
    after = identity(v.ref) + 0.0;
  }
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  check_equal(s.run({}, {after}).value()[0], tensor::scalar<int32_t>(2));
  check_equal(s.run({}, {after}).value()[0], tensor::scalar<int32_t>(4));
}

TEST_CASE("several virtual CPU devices run one graph", "[actors]") {
  runtime rt(runtime_options{.cpu_devices = 2});
  CHECK(rt.devices() == std::vector<std::string>{"/job:localhost/replica:0/task:0/device:cpu:0",
                                                 "/job:localhost/replica:0/task:0/device:cpu:1"});
  graph g;
  output a, b;
  {
    auto d = g.device("/device:cpu:0");
    a = constant(g, {1.f, 2.f}) * 3.0;
  }
  {
    auto d = g.device("/cpu:1");
    b = a + 1.0;
  }
  session s(rt, g);
  check_equal(s.run({}, {b}).value()[0], tensor::vector<float>({4, 7}));
  output c;
  {
    auto d = g.device("/device:gpu:0");
    c = b * 2.0;
  }
  auto r = s.run({}, {c});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("device spec '/device:GPU:0'"));
  CHECK_THAT(r.error().message(), Catch::Contains("/job:localhost/replica:0/task:0/device:cpu:1"));
  // With soft placement the GPU request falls back to a CPU.
  session soft(rt, g, {.allow_soft_placement = true});
  check_equal(soft.run({}, {c}).value()[0], tensor::vector<float>({8, 14}));
  {
    auto d = g.device("/cpu:7");
    c = b * 2.0;
  }
  CHECK_FALSE(s.run({}, {c}).ok());
  {
    auto d = g.device("/job:ps/cpu:0"); // jobs are never relaxed
    c = b * 2.0;
  }
  CHECK_FALSE(soft.run({}, {c}).ok());
}

TEST_CASE("the cost-model placer spreads independent work over virtual devices", "[actors]") {
  runtime rt(runtime_options{.cpu_devices = 2});
  graph g;
  auto x = placeholder(g, dtype::f32, {64, 64}, "x");
  output a = x, b = x;
  for (int i = 0; i < 3; ++i) {
    a = tanh(matmul(a, ones(g, dtype::f32, {64, 64})));
    b = tanh(matmul(b, ones(g, dtype::f32, {64, 64})));
  }
  auto y = a + b;
  auto feed = tensor(dtype::f32, shape{64, 64});
  for (auto& v : feed.flat<float>())
    v = 0.01f;
  session simple(rt, g);
  session greedy(rt, g, {.placement = session_options::placement_policy::cost_model});
  auto r1 = simple.run({{x, feed}}, {y}).value()[0];
  auto r2 = greedy.run({{x, feed}}, {y}).value()[0];
  CHECK(all_close(r1, r2));
}

TEST_CASE("reads of a variable stay on the variable's device", "[actors]") {
  runtime rt(runtime_options{.cpu_devices = 2});
  graph g;
  graph_variable w;
  {
    auto d = g.device("/cpu:1");
    w = variable(g, constant(g, {1.f, 2.f}), "w");
  }
  auto y = w.value * 3.0; // no device: the read must still find w's value
  for (auto policy : {session_options::placement_policy::first_feasible,
                      session_options::placement_policy::cost_model}) {
    session s(rt, g, {.placement = policy});
    REQUIRE(s.run({w.initializer}).ok());
    auto r = s.run({}, {y});
    INFO((r.ok() ? std::string("ok") : r.error().to_string()));
    REQUIRE(r.ok());
    check_equal(r.value()[0], tensor::vector<float>({3, 6}));
  }
}

TEST_CASE("random graphs spread over three devices compute what one device computes",
          "[actors]") {
  runtime one;
  runtime three(runtime_options{.cpu_devices = 3});
  std::mt19937 rng(7);
  for (int trial = 0; trial < 10; ++trial) {
    graph g;
    auto x = placeholder(g, dtype::f32, {4}, "x");
    std::vector<output> values{x};
    std::vector<operation> ops;
    for (int i = 0; i < 25; ++i) {
      auto pick = [&] {
        return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
      };
      auto d = g.device("/cpu:" + std::to_string(rng() % 3));
      // Some nodes also wait on an earlier node (a control edge, often across devices).
      std::vector<operation> deps;
      if (rng() % 4 == 0 && !ops.empty())
        deps.push_back(ops[rng() % ops.size()]);
      auto c = g.control_dependencies(deps);
      output v = (rng() % 2) ? add(pick(), pick()) : tanh(pick());
      values.push_back(v);
      ops.push_back(operation(v));
    }
    std::vector<output> fetches(values.end() - 5, values.end());
    auto feed = tensor::vector<float>({0.1f, -0.2f, 0.3f, 0.4f});
    session s1(one, g, {.allow_soft_placement = true}); // one device: specs relax to cpu:0
    session s3(three, g);
    for (int step = 0; step < 3; ++step) {
      auto a = s1.run({{x, feed}}, fetches).value();
      auto b = s3.run({{x, feed}}, fetches).value();
      for (size_t i = 0; i < a.size(); ++i)
        check_equal(b[i], a[i]);
    }
  }
}

TEST_CASE("concurrent sessions over one multi-device graph keep their tensors apart",
          "[actors]") {
  runtime rt(runtime_options{.cpu_devices = 2});
  graph g;
  auto x = placeholder(g, dtype::f32, {}, "x");
  output y;
  {
    auto d = g.device("/cpu:1");
    y = x * 2.0;
  }
  auto z = y + 1.0; // back on cpu:0
  session s1(rt, g), s2(rt, g);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      session& s = t ? s2 : s1;
      for (int i = 0; i < 300; ++i) {
        float v = float(t * 1000 + i);
        auto r = s.run({{x, tensor::scalar<float>(v)}}, {z});
        if (!r || *r.value()[0].data<float>() != 2 * v + 1)
          ++wrong;
      }
    });
  for (auto& th : threads)
    th.join();
  CHECK(wrong == 0);
}

TEST_CASE("Send/Recv between devices hands the buffer over without a copy", "[actors]") {
  runtime rt(runtime_options{.cpu_devices = 2});
  graph g;
  auto x = placeholder(g, dtype::f32, {1024}, "x");
  output a, b;
  {
    auto d = g.device("/cpu:0");
    a = x * 2.0;
  }
  {
    auto d = g.device("/cpu:1");
    b = identity(a);
  }
  session s(rt, g);
  auto r = s.run({{x, tensor(dtype::f32, shape{1024})}}, {a, b}).value();
  CHECK(r[0].shares_buffer_with(r[1]));
}

TEST_CASE("a traced run reports each node's device and time, as a Chrome trace", "[actors]") {
  runtime rt(runtime_options{.cpu_devices = 2});
  graph g;
  auto x = placeholder(g, dtype::f32, {32, 32}, "x");
  output a, b;
  {
    auto d = g.device("/cpu:0");
    a = matmul(x, ones(g, dtype::f32, {32, 32}), {}, "on_cpu0");
  }
  {
    auto d = g.device("/cpu:1");
    b = tanh(a, "on_cpu1");
  }
  session s(rt, g);
  run_metadata md;
  auto r = s.run({{x, tensor(dtype::f32, shape{32, 32})}}, {b}, {}, {.trace = true}, &md);
  REQUIRE(r.ok());
  // The two nodes, and the Recv that carried the product from cpu:0 to cpu:1 (the Send runs
  // inside the MatMul's actor).
  REQUIRE(md.nodes.size() == 3);
  std::map<std::string, node_trace> by_op;
  for (auto& n : md.nodes) {
    CHECK(n.end_ns >= n.start_ns);
    by_op[n.op] = n;
  }
  CHECK(by_op["MatMul"].device == rt.devices()[0]);
  CHECK(by_op["_Recv"].device == rt.devices()[1]);
  CHECK(by_op["Tanh"].device == rt.devices()[1]);
  CHECK(by_op["Tanh"].output_bytes == 32 * 32 * 4);
  // Kernels that ran on one thread say how much CPU they got: some, and no more than their
  // wall time (the Recv completes asynchronously: not measured).
  for (const char* op : {"MatMul", "Tanh"}) {
    INFO(op);
    CHECK(by_op[op].cpu_ns >= 0);
    CHECK(by_op[op].cpu_ns <= by_op[op].end_ns - by_op[op].start_ns);
  }
  CHECK(md.output_bytes_per_device.size() == 2);
  CHECK(md.output_bytes_per_device[1].second == 2 * 32 * 32 * 4); // the Recv's and Tanh's
  // The product lives on cpu:0 (the Recv hands the same buffer on), the Tanh's output on cpu:1.
  REQUIRE(md.peak_bytes_per_device.size() == 2);
  CHECK(md.peak_bytes_per_device[0].second == 32 * 32 * 4);
  CHECK(md.peak_bytes_per_device[1].second == 32 * 32 * 4);
  // The timeline is JSON that Python can read, with one named track per device.
  auto path = (std::filesystem::temp_directory_path() / "runnel_trace_test.json").string();
  {
    std::ofstream f(path);
    f << md.to_chrome_trace();
  }
  std::string check =
      "python3 -c \"import json,sys; t=json.load(open(sys.argv[1]))['traceEvents']; "
      "assert sum(e['ph']=='X' for e in t)==3; "
      "assert sum(e['ph']=='M' for e in t)==2; "
      "assert any(e['ph']=='C' and e['args']['bytes']>0 for e in t); "
      "assert any('cpu_us' in e.get('args', {}) for e in t)\" " +
      path;
  CHECK(std::system(check.c_str()) == 0);
  // Untraced runs record nothing.
  run_metadata none;
  REQUIRE(s.run({{x, tensor(dtype::f32, shape{32, 32})}}, {b}, {}, {}, &none).ok());
  CHECK(none.nodes.empty());
  // Measured times feed the cost model.
  cost_model costs;
  learn_costs(md, costs);
  CHECK(costs.has_measurement("on_cpu0", "CPU"));
}

TEST_CASE("a runtime shuts down cleanly with sessions closed and variables alive", "[actors]") {
  for (int i = 0; i < 3; ++i) {
    runtime rt;
    graph g;
    auto v = variable(g, constant(g, {1.f, 2.f}), "v");
    session s(rt, g);
    REQUIRE(s.run({v.initializer}).ok());
    check_equal(s.run({}, {v.value}).value()[0], tensor::vector<float>({1, 2}));
  }
}

TEST_CASE("destroying the runtime first closes its open sessions", "[actors]") {
  graph g;
  auto y = constant(g, 2.f) * 3.0;
  auto rt = std::make_unique<runtime>();
  session s(*rt, g);
  check_equal(s.run({}, {y}).value()[0], tensor::scalar<float>(6));
  rt.reset();
  CHECK(s.closed());
  CHECK(s.run({}, {y}).error().code() == error_code::cancelled);
}

TEST_CASE("a traced step's peak memory subtracts buffers freed during the step", "[actors]") {
  // A chain of five Tanh: each output lives until the next node ends, so at most two buffers
  // are live at once, while the five outputs total five buffers.
  graph g;
  auto x = placeholder(g, dtype::f32, {32, 32}, "x");
  output y = x;
  for (int i = 0; i < 5; ++i)
    y = tanh(y);
  // The chain as five nodes: element-wise fusion would make it one.
  session s(test_runtime(), g, {.optimizer = graph_optimizer_options::none()});
  run_metadata md;
  REQUIRE(s.run({{x, tensor(dtype::f32, shape{32, 32})}}, {y}, {}, {.trace = true}, &md).ok());
  REQUIRE(md.peak_bytes_per_device.size() == 1);
  CHECK(md.output_bytes_per_device[0].second == 5 * 4096);
  CHECK(md.peak_bytes_per_device[0].second == 2 * 4096);
  REQUIRE(md.memory_timeline.size() == 1);
  CHECK(md.memory_timeline[0].back().second == 0); // everything is handed back by the end
}

TEST_CASE("sessions sharing a cost model place with the times traced runs measured", "[actors]") {
  runtime rt(runtime_options{.cpu_devices = 2,
                             .cpu_params = device_params{.flops_per_s = 1e10, .bytes_per_s = 5e9}});
  CHECK(rt.cpu_params().flops_per_s == 1e10);
  graph g;
  auto x = placeholder(g, dtype::f32, {64, 64}, "x");
  auto y = tanh(matmul(x, ones(g, dtype::f32, {64, 64}), {}, "product"), "squash");
  auto costs = std::make_shared<cost_model>();
  session_options opts{.placement = session_options::placement_policy::cost_model,
                       .costs = costs};
  {
    session first(rt, g, opts);
    run_metadata md;
    REQUIRE(first.run({{x, tensor(dtype::f32, shape{64, 64})}}, {y}, {}, {.trace = true}, &md)
                .ok());
  }
  CHECK(costs->has_measurement("product", "CPU"));
  CHECK(costs->has_measurement("squash", "CPU"));
  session second(rt, g, opts); // places with the measured times
  auto r = second.run({{x, tensor(dtype::f32, shape{64, 64})}}, {y});
  REQUIRE(r.ok());
  CHECK(r.value()[0].shape() == shape{64, 64});
}

TEST_CASE("a runtime measures its CPU devices' throughput once, when first asked", "[actors]") {
  runtime rt(runtime_options{.cpu_devices = 2});
  auto& p = rt.cpu_params();
  CHECK(p.flops_per_s > 1e8);   // any CPU of this century
  CHECK(p.bytes_per_s > 1e8);
  CHECK(&rt.cpu_params() == &p);
  CHECK(rt.cpu_params().flops_per_s == p.flops_per_s);
}

TEST_CASE("a graph may grow on one thread while steps start on another", "[actors]") {
  // Each run after the graph grew builds a new instance, reading the graph while the other
  // thread adds nodes (Python's run_async beside op building did this and crashed): the session
  // reads under the graph's lock, and adding a node takes it for the moment it changes the store.
  graph g;
  auto x = placeholder(g, dtype::f32, shape{}, "x");
  auto y = x * 2.0f + 1.0f;
  session s(test_runtime(), g);
  std::atomic<bool> done{false};
  std::thread builder([&] {
    output z = x;
    for (int i = 0; i < 3000 && !done.load(); ++i)
      z = z + 1.0f;
  });
  for (int i = 0; i < 300; ++i) {
    auto r = s.run({{x, tensor::scalar<float>(float(i))}}, {y});
    REQUIRE(r.ok());
    REQUIRE(r.value()[0].data<float>()[0] == float(i) * 2 + 1);
  }
  done.store(true);
  builder.join();
}
