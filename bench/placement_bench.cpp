// Placement benchmarks:
//   place_10k_nodes  seconds to place a 10,000-node graph over 8 devices with the greedy
//                    cost-model placer (target <= 1 s), beside the simple policy on the same graph
//   graph_optimize_10k  seconds for the graph optimizer's passes over that graph (target
//                    <= 0.2 s), beside the simple placement policy's walk over it
//   placer_towers    measured step time of 4 independent MLP towers joined at the end, over 2
//                    virtual devices with exclusive thread budgets: the cost-model placer vs
//                    the first-device policy vs the best hand placement (simulated ratios beside)
//   placer_lstm      the same for a 4-layer LSTM-like stack of matmuls over 8 time steps
//   local_sendrecv   µs a Send/Recv pair adds per tensor inside one process: a chain of 200
//                    Identity nodes alternating between two devices, against the same chain on one
// Each prints `bench <name>: <figure> <unit> (<ratio>x <reference>)`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/kernel/kernel.hpp"
#include "runnel/ops/optimize/graph_optimizer.hpp"
#include "runnel/placement/cost_model.hpp"
#include "runnel/ops/cpu/builtin_kernels.hpp"

using namespace runnel;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// 40 towers of 50 layers (matmul, bias add, relu, plus constants) summed: ~10k nodes. Each
/// layer's constants differ (no two towers are the same computation).
output build_towers(graph& g) {
  auto filled = [&](shape s, float v) {
    tensor t(dtype::f32, s);
    std::fill_n(t.data<float>(), t.num_elements(), v);
    return constant(g, t);
  };
  auto x = placeholder(g, dtype::f32, {64, 128}, "x");
  std::vector<output> heads;
  for (int t = 0; t < 40; ++t) {
    auto s = g.name_scope("tower" + std::to_string(t));
    output h = x;
    for (int l = 0; l < 50; ++l)
      h = relu(bias_add(matmul(h, filled({128, 128}, float(t * 50 + l) * 1e-6f)),
                        filled({128}, float(l))));
    heads.push_back(h);
  }
  output sum = heads[0];
  for (size_t i = 1; i < heads.size(); ++i)
    sum = sum + heads[i];
  return sum;
}

void place_10k_nodes() {
  graph g;
  build_towers(g);
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

// The graph optimizer's passes over the same 10k-node graph, fetching the towers' sum (all nodes
// needed), against placing it with the simple policy (one walk over the graph).
void graph_optimize_10k() {
  graph g;
  auto sum = build_towers(g);
  auto nodes = all_nodes(g);
  auto devices = local_cpu_devices(1);
  std::vector<char> needed(size_t(g.num_nodes()), 1);
  graph_signature sig{.feeds = {g.find_endpoint("x").value()}, .fetches = {sum.ep()},
                      .targets = {}};
  cpu_device cpu(-1);
  graph_optimizer_context ctx{.kernels = &builtin_kernels(), .cpu = &cpu};
  double best = 1e9, best_simple = 1e9;
  int after = 0;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = now();
    auto og = optimize_graph(g, needed, sig, {}, ctx).value();
    best = std::min(best, now() - t0);
    after = og.g->num_nodes();
    t0 = now();
    auto s = place_simple(g, nodes, devices, any_kernel).value();
    best_simple = std::min(best_simple, now() - t0);
  }
  std::printf("bench graph_optimize_10k: %.3g s for %d nodes -> %d (%.2fx placing it with the "
              "simple policy, %.3g s; target 0.2 s)\n",
              best, g.num_nodes(), after, best / best_simple, best_simple);
}

// A model to place: builds itself into `g`; with `hand`, it puts its nodes on the devices the
// best hand placement uses (explicit device scopes). Returns the output to fetch.
using model_fn = std::function<output(graph& g, output x, bool hand)>;

// One placement of a model on a runtime, ready to run.
struct placed_model {
  graph g;
  output x, y;
  std::unique_ptr<session> s;
  feed_list feeds;
  std::vector<double> times;
  double simulated = 0; ///< the cost model's simulated step time, s
  /// The same simulation with the traced step's own node times in place of the model's
  /// estimates: what the model's scheduling and transfers predict when its per-node costs are
  /// right (it separates those from the FLOP and bandwidth guesses).
  double simulated_measured = 0;
  run_metadata traced; ///< the traced step

  placed_model(runtime& rt, const model_fn& model, const shape& in,
               session_options::placement_policy policy, bool hand) {
    x = placeholder(g, dtype::f32, in, "x");
    y = model(g, x, hand);
    session_options opts;
    opts.placement = policy;
    s = std::make_unique<session>(rt, g, opts);
    tensor xv(dtype::f32, in);
    auto* p = xv.data<float>();
    for (int64_t i = 0; i < xv.num_elements(); ++i)
      p[i] = float(i % 7) * 0.01f;
    feeds = {{x, xv}};
    throw_if_error(s->run(feeds, {y}).error()); // warm: the traced step is not the first
    traced = traced_median(5);
    simulated = simulate(rt, traced, false);
    simulated_measured = simulate(rt, traced, true);
  }
  // `runs` traced steps merged: the first one's nodes, each with the median of its durations and
  // CPU times over all (a single traced step on these VMs moved node times by up to 1.5x).
  run_metadata traced_median(int runs) {
    std::vector<run_metadata> all(static_cast<size_t>(runs));
    for (auto& md : all)
      throw_if_error(s->run(feeds, {y}, {}, run_options{.trace = true}, &md).error());
    run_metadata out = all[0];
    auto median = [](std::vector<int64_t> v) {
      std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
      return v[v.size() / 2];
    };
    for (size_t i = 0; i < out.nodes.size(); ++i) {
      std::vector<int64_t> wall, cpu;
      for (auto& md : all)
        for (auto& n : md.nodes)
          if (n.node == out.nodes[i].node && n.iteration == out.nodes[i].iteration) {
            wall.push_back(n.end_ns - n.start_ns);
            cpu.push_back(n.cpu_ns);
          }
      out.nodes[i].end_ns = out.nodes[i].start_ns + median(wall);
      out.nodes[i].cpu_ns = median(cpu);
    }
    return out;
  }
  void step() {
    double t0 = now();
    throw_if_error(s->run(feeds, {y}).error());
    times.push_back(now() - t0);
  }
  double median() {
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }
  // The cost model's simulation of the placement the traced step ran (with `measured`: using the
  // traced nodes' times, fused nodes' under their root's name).
  double simulate(runtime& rt, const run_metadata& md, bool measured) {
    auto nodes = all_nodes(g);
    auto devices = placement_devices_from(rt.devices());
    std::vector<size_t> where(nodes.size(), 0);
    std::vector<bool> traced(nodes.size(), false);
    for (auto& n : md.nodes) {
      auto id = g.find(n.node);
      if (!id)
        continue;
      traced[size_t(*id)] = true;
      for (size_t d = 0; d < devices.size(); ++d)
        if (devices[d].name == n.device)
          where[size_t(*id)] = d;
    }
    // Constants are bound into their consumers and never run: they sit where they are used.
    for (int v = 0; v < g.num_nodes(); ++v)
      for (auto& e : g.at(v).inputs)
        if (!traced[size_t(e.node)])
          where[size_t(e.node)] = where[size_t(v)];
    // The throughput the placer itself used (measured by the runtime on first use).
    std::vector<device_params> params(devices.size(), rt.cpu_params());
    cost_model costs;
    if (measured)
      learn_costs(md, costs);
    return simulate_placement(g, nodes, where, devices, params, costs);
  }
};

// Per op type, the cost model's estimate of the traced nodes against their traced times: which
// ops the model gets wrong (a fused node is compared under its root's op).
std::string op_agreement(runtime& rt, const placed_model& m) {
  struct sums {
    double estimated = 0, traced = 0, cpu = 0;
    int nodes = 0;
  };
  std::map<std::string, sums> by_op;
  cost_model costs;
  for (auto& n : m.traced.nodes) {
    auto id = m.g.find(n.node);
    if (!id)
      continue;
    const node& gn = m.g.at(*id);
    auto& s = by_op[gn.op == n.op ? gn.op : gn.op + " as " + n.op];
    s.estimated += costs.compute_seconds(m.g, gn, "CPU", rt.cpu_params());
    s.traced += double(n.end_ns - n.start_ns) / 1e9;
    s.cpu += double(n.cpu_ns < 0 ? n.end_ns - n.start_ns : n.cpu_ns) / 1e9;
    ++s.nodes;
  }
  std::string out;
  char buf[160];
  for (auto& [op, s] : by_op) {
    std::snprintf(buf, sizeof buf, "%s%s %.2fx (%d, %.3g ms traced, %.0f%% on CPU)",
                  out.empty() ? "" : "; ", op.c_str(), s.estimated / std::max(s.traced, 1e-12),
                  s.nodes, s.traced * 1e3, 100 * s.cpu / std::max(s.traced, 1e-12));
    out += buf;
  }
  return out;
}

// Runs the model under the first-device policy, the cost-model placer and the hand placement on
// a runtime of two virtual CPU devices, each with an exclusive budget of half the cores. Their
// steps interleave, so drift in the machine's speed hits all three alike; medians of 21 steps.
void compare_placements(const char* name, const char* what, const model_fn& model,
                        const shape& in) {
  static runtime* rt = new runtime(runtime_options{.cpu_devices = 2}); // never destroyed
  using policy = session_options::placement_policy;
  placed_model simple(*rt, model, in, policy::first_feasible, false);
  placed_model greedy(*rt, model, in, policy::cost_model, false);
  placed_model hand(*rt, model, in, policy::first_feasible, true);
  for (int r = 0; r < 21; ++r) {
    simple.step();
    greedy.step();
    hand.step();
  }
  double ts = simple.median(), tg = greedy.median(), th = hand.median();
  std::printf("bench %s: %.3g ms step (%.2fx first-device policy %.3g ms; hand placement %.3g ms "
              "= %.2fx; %s over 2 devices of %d threads each; the cost model simulated %.2fx "
              "first-device; targets <= 0.8x and <= 1.1x hand)\n",
              name, tg * 1e3, tg / ts, ts * 1e3, th * 1e3, tg / th, what,
              rt->device_threads(),
              greedy.simulated / simple.simulated);
  // Whether the placer's picture of the step is the step: its simulation of each placement
  // against that placement's measured median.
  std::printf(
      "bench %s_model: the cost model's simulated step %.3g ms = %.2fx the measured %.3g ms "
      "(first-device %.2fx, hand %.2fx; devices calibrated at %.3g GFLOP/s; target "
      "0.8-1.2x); with each traced node's own time in place of the estimates %.2fx "
      "(first-device %.2fx, hand %.2fx)\n",
      name, greedy.simulated * 1e3, greedy.simulated / tg, tg * 1e3, simple.simulated / ts,
      hand.simulated / th, rt->cpu_params().flops_per_s / 1e9, greedy.simulated_measured / tg,
      simple.simulated_measured / ts, hand.simulated_measured / th);
  std::printf("bench %s_ops: estimated/traced time per op type, cost-model placement: %s\n", name,
              op_agreement(*rt, greedy).c_str());
}

// Four independent MLP towers (4 layers of 256x512 by 512x512) joined at the end. By hand: towers
// 0 and 1 on cpu:0, towers 2 and 3 on cpu:1. Every layer's weights differ: with one value for all,
// the graph optimizer's common-subexpression pass rightly merged the four towers into one, which
// left the placer nothing to spread (docs/placement.md, "The benchmarks' own graphs").
void placer_towers() {
  model_fn model = [](graph& g, output x, bool hand) {
    std::vector<output> heads;
    for (int t = 0; t < 4; ++t) {
      auto s = g.name_scope("tower" + std::to_string(t));
      auto d = g.device(hand ? (t < 2 ? "/cpu:0" : "/cpu:1") : "");
      output h = x;
      for (int l = 0; l < 4; ++l)
        h = relu(matmul(h, filled(g, dtype::f32, shape{512, 512}, 0.001f * float(1 + t * 4 + l))));
      heads.push_back(h);
    }
    auto d = g.device(hand ? "/cpu:0" : "");
    return (heads[0] + heads[1]) + (heads[2] + heads[3]);
  };
  compare_placements("placer_towers", "4 MLP towers", model, shape{256, 512});
}

// An LSTM-like stack: 4 layers over 8 time steps, each cell h[l][t] = tanh(h[l-1][t] W[l] +
// h[l][t-1] U[l]). A layer depends on the one below at the same step and on itself at the previous
// step, so layers can run as a pipeline. By hand: layers 0-1 on cpu:0, layers 2-3 on cpu:1. Each
// layer's weights and each step's input differ, as in a real LSTM (the same ones made the graph
// optimizer merge the first layer's products over the steps).
void placer_lstm() {
  model_fn model = [](graph& g, output x, bool hand) {
    constexpr int layers = 4, steps = 8, units = 512;
    std::vector<output> w, u;
    for (int l = 0; l < layers; ++l) {
      auto d = g.device(hand ? (l < 2 ? "/cpu:0" : "/cpu:1") : "");
      w.push_back(filled(g, dtype::f32, shape{units, units}, 0.001f * float(1 + 2 * l)));
      u.push_back(filled(g, dtype::f32, shape{units, units}, 0.001f * float(2 + 2 * l)));
    }
    std::vector<output> state(layers);
    output top;
    for (int t = 0; t < steps; ++t) {
      output below = t == 0 ? x : x * (1.0 + 0.125 * t);
      for (int l = 0; l < layers; ++l) {
        auto d = g.device(hand ? (l < 2 ? "/cpu:0" : "/cpu:1") : "");
        auto s = g.name_scope("l" + std::to_string(l) + "t" + std::to_string(t));
        output in = matmul(below, w[size_t(l)]);
        output h = t == 0 ? tanh(in) : tanh(in + matmul(state[size_t(l)], u[size_t(l)]));
        state[size_t(l)] = h;
        below = h;
      }
      top = t == 0 ? below : top + below;
    }
    return top;
  };
  compare_placements("placer_lstm", "4-layer LSTM-like stack, 8 steps", model, shape{128, 512});
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
    // Every Identity a node: the graph optimizer would remove those on one device.
    session s(*rt, g, {.optimizer = graph_optimizer_options::none()});
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

int main(int argc, char** argv) {
  runnel::reexec_with_better_blas_core(argv); // OpenBLAS's own kernels, not its generic ones
  // [--only NAME]: one benchmark (e.g. to profile it alone).
  std::string only = argc == 3 && std::string(argv[1]) == "--only" ? argv[2] : "";
  if (argc > 1 && only.empty()) {
    std::fprintf(stderr, "usage: placement_bench [--only NAME]\n");
    return 2;
  }
  const std::pair<const char*, void (*)()> all[] = {{"placer_towers", placer_towers},
                                                    {"placer_lstm", placer_lstm},
                                                    {"place_10k_nodes", place_10k_nodes},
                                                    {"graph_optimize_10k", graph_optimize_10k},
                                                    {"local_sendrecv", local_sendrecv}};
  bool ran = false;
  for (auto& [name, run] : all)
    if (only.empty() || only == name) {
      run();
      ran = true;
    }
  if (!ran)
    std::fprintf(stderr, "placement_bench: no benchmark called '%s'\n", only.c_str());
  return ran ? 0 : 2;
}
