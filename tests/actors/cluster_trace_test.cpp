// Where a distributed step's nodes run and when, seen through traces: every task's nodes on the
// client's clock, and an optimizer's update group running with the variables it gathers.
#include <set>

#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/tests/actors/cluster_nodes.hpp"
#include "runnel/tests/eval.hpp"
#include "runnel/tests/ports.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("a traced remote step records every task's nodes on the client's clock",
          "[actors][cluster]") {
  auto nodes = start_ps_and_worker();
  graph g;
  auto x = placeholder(g, dtype::f32, {2, 3}, "x");
  graph_variable w;
  {
    auto d = g.device("/job:ps/task:0");
    w = variable(g, constant(g, tensor::from_values<float>(shape{3, 2}, {1, 2, 3, 4, 5, 6})), "w");
  }
  output y;
  {
    auto d = g.device("/job:worker/task:0");
    y = tanh(matmul(x, w.value), "y");
  }
  // The client calls the master in its own process directly, or over the network as another
  // process would: the trace aligns a clock per call either way.
  session_options so;
  SECTION("in process") {
    so.in_process_master = true;
  }
  SECTION("over the network") {
    so.in_process_master = false;
  }
  session s(client_runtime(), g, nodes.target(), so);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto xv = tensor::from_values<float>(shape{2, 3}, {1, 0, -1, 0.5f, 2, 3});
  run_metadata md;
  auto r = s.run({{x, xv}}, {y}, {}, run_options{.trace = true}, &md);
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  auto plain = s.run({{x, xv}}, {y}).value();
  check_equal(r.value()[0], plain[0]);

  // The client's call spans the step; the master's calls to each task and each task's nodes lie
  // inside it: the clocks are aligned as NTP does, which keeps a served call inside its caller's.
  const node_trace* run = nullptr;
  std::set<std::string> devices, calls;
  for (auto& n : md.nodes) {
    devices.insert(n.device);
    if (n.op == "_Run")
      run = &n;
    if (n.op == "_RunGraph")
      calls.insert(n.node);
  }
  REQUIRE(run != nullptr);
  CHECK(run->start_ns == 0);
  CHECK(md.origin_ns > 0);
  for (auto& n : md.nodes) {
    INFO(n.node << " on " << n.device << ": " << n.start_ns << ".." << n.end_ns);
    CHECK(n.start_ns >= 0);
    CHECK(n.start_ns <= n.end_ns);
    CHECK(n.end_ns <= run->end_ns);
  }
  CHECK(calls == std::set<std::string>{"runGraph /job:ps/replica:0/task:0",
                                       "runGraph /job:worker/replica:0/task:0"});
  CHECK(devices.count("/job:ps/replica:0/task:0/device:cpu:0") == 1);
  CHECK(devices.count("/job:worker/replica:0/task:0/device:cpu:0") == 1);
  bool matmul_on_worker = false, send_on_ps = false;
  for (auto& n : md.nodes) {
    matmul_on_worker |= n.op == "MatMul" && n.device.find("/job:worker/") == 0;
    send_on_ps |= n.op == "_Send" && n.device.find("/job:ps/") == 0;
  }
  CHECK(matmul_on_worker);
  CHECK(send_on_ps);
  // One Chrome trace, a track per task's device and for the calls.
  std::string chrome = md.to_chrome_trace();
  CHECK(chrome.find("\"/job:ps/replica:0/task:0/device:cpu:0\"") != std::string::npos);
  CHECK(chrome.find("\"/job:worker/replica:0/task:0/device:cpu:0\"") != std::string::npos);
  CHECK(chrome.find("\"master: runGraph calls\"") != std::string::npos);
}

TEST_CASE("an update group over one ps runs on the ps: the worker waits for no control edge",
          "[actors][cluster]") {
  auto nodes = start_ps_and_worker();
  graph g;
  auto x = placeholder(g, dtype::f32, {2, 3}, "x");
  graph_variable w, b;
  {
    auto d = g.device("/job:ps/task:0");
    w = variable(g, constant(g, tensor::from_values<float>(shape{3, 1}, {1, 2, 3})), "w");
    b = variable(g, constant(g, tensor::scalar<float>(0.5f)), "b");
  }
  operation train;
  output loss;
  {
    auto d = g.device("/job:worker/task:0");
    loss = sum(matmul(x, w.value) + b.value);
    train = gradient_descent_optimizer(0.1).minimize(loss); // applies on the ps, grouped here
  }
  REQUIRE(train.node().op == "NoOp");
  REQUIRE(train.node().device == "/job:worker/task:0");
  session s(client_runtime(), g, nodes.target());
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto xv = tensor::from_values<float>(shape{2, 3}, {1, 1, 1, 1, 1, 1});
  run_metadata md;
  auto r = s.run({{x, xv}}, {loss}, {train}, run_options{.trace = true}, &md);
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  bool group_on_ps = false;
  for (auto& n : md.nodes) {
    INFO(n.node << " (" << n.op << ") on " << n.device);
    CHECK_FALSE((n.op == "_Recv" && n.device.find("/job:worker/") == 0 &&
                 n.node.find("_ctrl") != std::string::npos));
    group_on_ps |= n.node == train.name() && n.device.find("/job:ps/") == 0;
  }
  CHECK(group_on_ps);
  // And the step did what it says: w -= 0.1 * d(loss)/dw = 0.1 * 2 per element.
  auto wv = s.run({}, {w.value}).value()[0];
  CHECK(wv.data<float>()[0] == Approx(0.8f));
  CHECK(wv.data<float>()[2] == Approx(2.8f));
}
