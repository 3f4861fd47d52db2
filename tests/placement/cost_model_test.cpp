#include <catch2/catch.hpp>

#include "runnel/ops/graph/builder.hpp"
#include "runnel/placement/cost_model.hpp"

using namespace runnel;

namespace {

std::vector<placement_device> devices(std::initializer_list<const char*> names) {
  return placement_devices_from(std::vector<std::string>(names.begin(), names.end()));
}

/// A tower of `depth` matmuls of width `w` on input x.
output tower(output x, int depth, int64_t w, const std::string& name) {
  graph& g = x.owner();
  auto s = g.name_scope(name);
  for (int i = 0; i < depth; ++i)
    x = tanh(matmul(x, zeros(g, dtype::f32, {w, w})));
  return x;
}

} // namespace

TEST_CASE("the cost model estimates FLOPs and bytes from shapes", "[placement]") {
  graph g;
  auto a = placeholder(g, dtype::f32, {64, 128}, "a");
  auto b = placeholder(g, dtype::f32, {128, 32}, "b");
  auto c = matmul(a, b);
  cost_model costs;
  CHECK(costs.flops(g, c.node()) == 2.0 * 64 * 128 * 32);
  CHECK(costs.output_bytes(c.node()) == 64 * 32 * 4);
  auto t = tanh(c);
  CHECK(costs.flops(g, t.node()) == 64 * 32);
  device_params p{.flops_per_s = 1e9, .bytes_per_s = 1e9, .node_overhead_s = 0};
  CHECK(costs.compute_seconds(g, c.node(), "CPU", p) == Approx(2.0 * 64 * 128 * 32 / 1e9));
  costs.record(c.node().name, "CPU", 0.5);
  CHECK(costs.compute_seconds(g, c.node(), "CPU", p) == 0.5);
}

TEST_CASE("the cost model times cached tensors at the cache's rate and tanh by its elements",
          "[placement]") {
  graph g;
  auto small = placeholder(g, dtype::f32, {256, 256}, "small");   // 256 KB
  auto large = placeholder(g, dtype::f32, {4096, 1024}, "large"); // 16 MB
  cost_model costs;
  device_params p{.flops_per_s = 1e12,
                  .bytes_per_s = 1e9,
                  .cache_bytes_per_s = 4e9,
                  .cache_bytes = int64_t(1) << 20,
                  .transcendental_per_s = 1e12,
                  .node_overhead_s = 0};
  // Relu reads and writes its tensor: 512 KB fit in the cache, 32 MB do not.
  auto r_small = relu(small), r_large = relu(large);
  CHECK(costs.compute_seconds(g, r_small.node(), "CPU", p) == Approx(512.0 * 1024 / 4e9));
  CHECK(costs.compute_seconds(g, r_large.node(), "CPU", p) == Approx(32.0 * 1024 * 1024 / 1e9));
  // A device whose memory is faster than the cache figure (a GPU's) keeps its memory's rate.
  device_params fast = p;
  fast.bytes_per_s = 1e12;
  CHECK(costs.compute_seconds(g, r_small.node(), "CPU", fast) == Approx(512.0 * 1024 / 1e12));
  // Tanh costs its elements at the transcendental rate when that is the slowest part; Relu,
  // Add and MatMul compute none.
  auto t_small = tanh(small);
  CHECK(costs.transcendental_elements(t_small.node()) == 256.0 * 256);
  CHECK(costs.transcendental_elements(r_small.node()) == 0);
  CHECK(costs.transcendental_elements((small + small).node()) == 0);
  p.transcendental_per_s = 1e6;
  CHECK(costs.compute_seconds(g, t_small.node(), "CPU", p) == Approx(256.0 * 256 / 1e6));
  CHECK(costs.compute_seconds(g, r_small.node(), "CPU", p) == Approx(512.0 * 1024 / 4e9));
  // The optimizer's fusion of `tanh(a + b) * c` costs its Tanh, and a flop an element per op.
  node fused;
  fused.op = "_FusedElementwise";
  fused.attrs = {{"ops", std::vector<std::string>{"Add", "Tanh", "Mul"}}};
  fused.output_types = {dtype::f32};
  fused.output_shapes = {shape{256, 256}};
  CHECK(costs.transcendental_elements(fused) == 256.0 * 256);
  CHECK(costs.flops(g, fused) == 3.0 * 256 * 256);
  CHECK(costs.compute_seconds(g, fused, "CPU", p) == Approx(256.0 * 256 / 1e6));
  fused.attrs = {{"ops", std::vector<std::string>{"Add", "Relu"}}};
  CHECK(costs.transcendental_elements(fused) == 0);
}

TEST_CASE("greedy placement splits independent towers over two devices", "[placement]") {
  graph g;
  auto x = placeholder(g, dtype::f32, {256, 512}, "x");
  auto a = tower(x, 4, 512, "tower_a");
  auto b = tower(x, 4, 512, "tower_b");
  [[maybe_unused]] auto y = a + b; // the graph the placer sees
  auto devs = devices({"/job:localhost/replica:0/task:0/device:CPU:0",
                       "/job:localhost/replica:0/task:0/device:CPU:1"});
  std::vector<device_params> params(2);
  cost_model costs;
  auto nodes = all_nodes(g);
  auto greedy = place_greedy(g, nodes, devs, params, costs, any_kernel).value();
  auto simple = place_simple(g, nodes, devs, any_kernel).value();
  double t_greedy = simulate_placement(g, nodes, greedy.device, devs, params, costs);
  double t_simple = simulate_placement(g, nodes, simple, devs, params, costs);
  INFO(greedy.explain(g, nodes, devs));
  CHECK(t_greedy == Approx(greedy.makespan_s));
  CHECK(t_greedy < 0.6 * t_simple);
  // The two towers' matmuls sit on different devices.
  size_t dev_a = 0, dev_b = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const node& n = g.at(nodes[i]);
    if (n.op != "MatMul")
      continue;
    (n.name.rfind("tower_a", 0) == 0 ? dev_a : dev_b) |= size_t(1) << greedy.device[i];
  }
  CHECK(dev_a != dev_b);
  CHECK(greedy.explain(g, nodes, devs).find("earliest estimated finish") != std::string::npos);
  // Deterministic.
  CHECK(place_greedy(g, nodes, devs, params, costs, any_kernel).value().device == greedy.device);
}

TEST_CASE("a chain stays on one device when moving data costs more than it saves",
          "[placement]") {
  graph g;
  auto x = placeholder(g, dtype::f32, {1000, 1000}, "x");
  output y = x;
  for (int i = 0; i < 6; ++i)
    y = y * 2.0; // cheap ops on 4 MB tensors
  // Two devices in different processes: every hop costs 50 us + 4 MB / 2.5 GB/s.
  auto devs = devices({"/job:worker/replica:0/task:0/device:CPU:0",
                       "/job:worker/replica:0/task:1/device:CPU:0"});
  std::vector<device_params> params(2);
  cost_model costs;
  auto nodes = all_nodes(g);
  auto p = place_greedy(g, nodes, devs, params, costs, any_kernel).value();
  INFO(p.explain(g, nodes, devs));
  for (size_t i = 0; i < nodes.size(); ++i)
    if (g.at(nodes[i]).op == "Mul") // (the scalar constants may go anywhere: 4 bytes)
      CHECK(p.device[i] == p.device[0]);
}

TEST_CASE("greedy placement keeps colocation, specs and memory limits", "[placement]") {
  graph g;
  graph_variable w;
  {
    auto d = g.device("/device:CPU:1");
    w = variable(g, constant(g, {1.f, 2.f}), "w");
  }
  auto big = placeholder(g, dtype::f32, {1024, 1024}, "big"); // 4 MB
  auto doubled = big * 2.0;
  auto devs = devices({"/job:localhost/replica:0/task:0/device:CPU:0",
                       "/job:localhost/replica:0/task:0/device:CPU:1"});
  auto nodes = all_nodes(g);
  std::vector<device_params> params(2);
  params[0].memory_bytes = 1 << 20; // 1 MB: the 4 MB products do not fit on CPU:0
  cost_model costs;
  auto p = place_greedy(g, nodes, devs, params, costs, any_kernel).value();
  auto at = [&](const std::string& name) { return p.device[size_t(*g.find(name))]; };
  CHECK(at("w") == 1);
  CHECK(at(w.initializer.name()) == 1);
  CHECK(at(doubled.node().name) == 1);
  params[1].memory_bytes = 1 << 20;
  auto none = place_greedy(g, nodes, devs, params, costs, any_kernel);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code() == error_code::resource_exhausted);
  CHECK_THAT(none.error().message(), Catch::Contains("out of memory"));
}

TEST_CASE("measured timings change a later placement", "[placement]") {
  graph g;
  auto x = placeholder(g, dtype::f32, {512, 512}, "x");
  auto y = matmul(x, zeros(g, dtype::f32, {512, 512}), {}, "mm");
  auto devs = devices({"/job:localhost/replica:0/task:0/device:CPU:0",
                       "/job:localhost/replica:0/task:0/device:GPU:0"});
  std::vector<device_params> params(2);
  params[1].flops_per_s = 1e13; // the GPU looks much faster on paper
  cost_model costs;
  auto nodes = all_nodes(g);
  auto at = [&](const greedy_placement& p) { return p.device[size_t(y.node_id())]; };
  CHECK(at(place_greedy(g, nodes, devs, params, costs, any_kernel).value()) == 1);
  costs.record("mm", "GPU", 1.0); // but a traced run measured it at 1 s there
  CHECK(at(place_greedy(g, nodes, devs, params, costs, any_kernel).value()) == 0);
}

TEST_CASE("moving a large tensor to a GPU costs its bytes over the host link", "[placement]") {
  graph g;
  output x, y;
  {
    auto d = g.device("/device:CPU:0");
    x = placeholder(g, dtype::f32, {4096, 4096}, "x"); // 64 MiB, on the CPU
  }
  y = x + 1.0; // little arithmetic per byte
  auto devs = devices({"/job:localhost/replica:0/task:0/device:CPU:0",
                       "/job:localhost/replica:0/task:0/device:GPU:0"});
  std::vector<device_params> params(2);
  params[1].flops_per_s = 1e14; // the GPU computes and reads memory far faster
  params[1].bytes_per_s = 2e12;
  cost_model costs;
  auto nodes = all_nodes(g);
  auto at = [&](const greedy_placement& p) { return p.device[size_t(y.node_id())]; };
  link_params slow_link{.host_device_bytes_per_s = 1e9};
  CHECK(at(place_greedy(g, nodes, devs, params, costs, any_kernel, {}, slow_link).value()) == 0);
  link_params fast_link{.host_device_bytes_per_s = 1e15};
  CHECK(at(place_greedy(g, nodes, devs, params, costs, any_kernel, {}, fast_link).value()) == 1);
}

TEST_CASE("the simulated step runs each device's ready nodes as the executor does, not in the "
          "order of the node list",
          "[placement]") {
  // a (1 s, device 0) feeds b (1 s, device 1); c (1 s, device 1) waits for nothing but comes
  // after b in the list. A device free while b waits for a runs c: the step takes 2 s (plus
  // the transfer), where running the list in order kept device 1 idle for 1 s and took 3 s.
  graph g;
  auto x = placeholder(g, dtype::f32, {4}, "x");
  auto a = tanh(x, "a");
  auto b = tanh(a, "b");
  auto c = tanh(x, "c");
  auto devs = devices({"/job:localhost/replica:0/task:0/device:CPU:0",
                       "/job:localhost/replica:0/task:0/device:CPU:1"});
  std::vector<device_params> params(2);
  cost_model costs;
  for (auto name : {"a", "b", "c"})
    costs.record(name, "CPU", 1.0);
  std::vector<int> nodes{a.node().id, b.node().id, c.node().id};
  link_params links{.same_process_latency_s = 0.25};
  CHECK(simulate_placement(g, nodes, {0, 1, 1}, devs, params, costs, links) == Approx(2.25));
  // All on one device: one after the other, whatever the order.
  CHECK(simulate_placement(g, nodes, {0, 0, 0}, devs, params, costs, links) == Approx(3.0));
  // A control input waits like a data input (its transfer carries no bytes).
  graph h;
  auto hx = placeholder(h, dtype::f32, {4}, "x");
  auto p = tanh(hx, "p");
  auto q = tanh(hx, "q");
  REQUIRE(h.add_control_edge(p.node().id, q.node().id).ok());
  cost_model hc;
  hc.record("p", "CPU", 1.0);
  hc.record("q", "CPU", 1.0);
  CHECK(simulate_placement(h, {p.node().id, q.node().id}, {0, 1}, devs, params, hc, links) ==
        Approx(2.25));
}
