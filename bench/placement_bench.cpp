// Placement benchmarks:
//   place_10k_nodes  seconds to place a 10,000-node graph over 8 devices with the greedy
//                    cost-model placer (target <= 1 s), beside the simple policy on the same graph
//   placer_towers    simulated step time of 4 independent MLP towers joined at the end, over 2
//                    devices: greedy vs first-device policy vs the best hand placement
//   local_sendrecv   µs a Send/Recv pair adds per tensor inside one process: a chain of 200
//                    Identity nodes alternating between two devices, against the same chain on one
// Each prints `bench <name>: <figure> <unit> (<ratio>x <reference>)`. The step times are the cost
// model's simulation, not measured runs (the runtime does not yet give devices exclusive
// compute budgets; see docs/placement.md).
#include <chrono>
#include <cstdio>

#include "actors/session.hpp"
#include "ops/builder.hpp"
#include "placement/cost_model.hpp"

using namespace runnel;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}




void place_10k_nodes() {
  graph g;
  // 40 towers of 50 layers (matmul, bias add, relu, plus constants): ~10k nodes.
  auto x = placeholder(g, dtype::f32, {64, 128}, "x");
  std::vector<output> heads;
  for (int t = 0; t < 40; ++t) {
    auto s = g.name_scope("tower" + std::to_string(t));
    output h = x;
    for (int l = 0; l < 50; ++l)
      h = relu(bias_add(matmul(h, zeros(g, dtype::f32, {128, 128})), zeros(g, dtype::f32, {128})));
    heads.push_back(h);
  }
  output sum = heads[0];
  for (size_t i = 1; i < heads.size(); ++i)
    sum = sum + heads[i];
  auto nodes = all_nodes(g);
  auto devices = local_cpu_devices(8);
  std::vector<device_params> params(8);
  cost_model costs;
  double best = 1e9, best_simple = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = now();
    auto p = place_greedy(g, nodes, devices, params, costs, any_kernel).value();
    best = std::min(best, now() - t0);
    t0 = now();
    auto s = place_simple(g, nodes, devices, any_kernel).value();
    best_simple = std::min(best_simple, now() - t0);
  }
  std::printf("bench place_10k_nodes: %.3g s for %d nodes over 8 devices (%.2fx the simple "
              "policy, %.3g s; target 1 s)\n",
              best, g.num_nodes(), best / best_simple, best_simple);
}

void placer_towers() {
  graph g;
  auto x = placeholder(g, dtype::f32, {256, 512}, "x");
  std::vector<output> heads;
  std::vector<std::vector<int>> tower_nodes(4);
  for (int t = 0; t < 4; ++t) {
    auto s = g.name_scope("tower" + std::to_string(t));
    int first = g.num_nodes();
    output h = x;
    for (int l = 0; l < 4; ++l)
      h = relu(matmul(h, zeros(g, dtype::f32, {512, 512})));
    heads.push_back(h);
    for (int v = first; v < g.num_nodes(); ++v)
      tower_nodes[size_t(t)].push_back(v);
  }
  auto y = (heads[0] + heads[1]) + (heads[2] + heads[3]);
  (void)y;
  auto nodes = all_nodes(g);
  auto devices = local_cpu_devices(2);
  std::vector<device_params> params(2);
  cost_model costs;
  auto greedy = place_greedy(g, nodes, devices, params, costs, any_kernel).value();
  auto simple = place_simple(g, nodes, devices, any_kernel).value();
  // By hand: towers 0 and 1 on CPU:0, 2 and 3 on CPU:1, the rest on CPU:0.
  std::vector<size_t> hand(nodes.size(), 0);
  for (int t = 2; t < 4; ++t)
    for (int v : tower_nodes[size_t(t)])
      hand[size_t(v)] = 1;
  double tg = simulate_placement(g, nodes, greedy.device, devices, params, costs);
  double ts = simulate_placement(g, nodes, simple, devices, params, costs);
  double th = simulate_placement(g, nodes, hand, devices, params, costs);
  std::printf("bench placer_towers: %.3g ms simulated step (%.2fx first-device policy %.3g ms; "
              "hand placement %.3g ms = %.2fx; targets <= 0.8x and <= 1.1x hand)\n",
              tg * 1e3, tg / ts, ts * 1e3, th * 1e3, tg / th);
}

void local_sendrecv() {
  auto* rt = new runtime(runtime_options{.cpu_devices = 2}); // never destroyed: see tests/eval.hpp
  constexpr int chain = 200;
  auto measure = [&](bool alternate) {
    graph g;
    auto x = placeholder(g, dtype::f32, {16}, "x");
    output y = x;
    for (int i = 0; i < chain; ++i) {
      auto d = g.device(alternate && i % 2 ? "/cpu:1" : "/cpu:0");
      y = identity(y);
    }
    session s(*rt, g);
    feed_list feeds{{x, tensor(dtype::f32, shape{16})}};
    throw_if_error(s.run(feeds, {y}).error());
    double best = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
      int runs = 200;
      double t0 = now();
      for (int r = 0; r < runs; ++r)
        throw_if_error(s.run(feeds, {y}).error());
      best = std::min(best, (now() - t0) / runs);
    }
    return best;
  };
  double same = measure(false), crossing = measure(true);
  double per_tensor = (crossing - same) / chain;
  std::printf("bench local_sendrecv: %.3g us per tensor (a chain of %d nodes: %.3g us crossing "
              "devices at every edge, %.3g us on one device = %.2fx; target 2 us)\n",
              per_tensor * 1e6, chain, crossing * 1e6, same * 1e6, crossing / same);
}

} // namespace

int main() {
  placer_towers();
  place_10k_nodes();
  local_sendrecv();
  return 0;
}
