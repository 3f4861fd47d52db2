// Control-flow benchmarks:
//   while_loop_overhead  µs per iteration of a 10,000-iteration while_loop of `i + 1` (target
//                        <= 1 µs), beside the same loop with every firing a message
//                        (inline_firing off) and the µs one node hop costs in a static chain of
//                        Adds run in the same process
//   dynamic_vs_static_rnn  forward + backward of a 1-layer tanh RNN (hidden 256, batch 32, 50
//                        steps) as a while_loop over TensorArrays vs the same graph unrolled:
//                        step-time ratio (target <= 1.05) and the peak of tensor bytes alive
//                        during a step (target: dynamic <= static)
// Prints `bench <name>: <figure> <unit> (<ratio>x <reference>)`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/tensor_array.hpp"

using namespace runnel;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Median seconds of `reps` runs of `fetch`, after one warm-up run.
double median_run(session& s, const output& fetch, int reps) {
  throw_if_error(s.run({}, {fetch}).error());
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    throw_if_error(s.run({}, {fetch}).error());
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void while_loop_overhead() {
  runtime rt;
  constexpr int iterations = 10'000;
  graph g;
  auto limit = constant(g, int32_t(iterations));
  auto out = while_loop([&](const std::vector<output>& v) { return less(v[0], limit); },
                        [&](const std::vector<output>& v) {
                          return std::vector<output>{v[0] + constant(g, int32_t(1))};
                        },
                        {constant(g, int32_t(0))});
  session s(rt, g);
  double loop_s = median_run(s, out[0], 7);
  // The same loop with every firing a message (what inline firing saves, in the same run).
  session ms(rt, g, {.inline_firing = false});
  double messages_s = median_run(ms, out[0], 7);

  // The floor: a chain of 2,000 Adds, one actor hop each, in one step.
  constexpr int chain = 2'000;
  graph h;
  output x = constant(h, int32_t(0));
  auto one = placeholder(h, dtype::i32, shape{}, "one");
  for (int k = 0; k < chain; ++k)
    x = x + one;
  session hs(rt, h);
  auto feed = tensor::scalar<int32_t>(1);
  throw_if_error(hs.run({{one, feed}}, {x}).error());
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    double t0 = now();
    throw_if_error(hs.run({{one, feed}}, {x}).error());
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  double hop_us = t[t.size() / 2] / chain * 1e6;
  double iter_us = loop_s / iterations * 1e6;
  double messages_us = messages_s / iterations * 1e6;
  std::printf("while_loop_overhead: %.2f us per iteration (%d iterations in %.1f ms); every "
              "firing a message %.2f us; static node hop %.2f us\n",
              iter_us, iterations, loop_s * 1e3, messages_us, hop_us);
  std::printf("bench while_loop_overhead: %.2f us/iteration (%.2fx the 1 us target; %.2fx the "
              "same loop with every firing a message; %.1fx a static node hop)\n",
              iter_us, iter_us / 1.0, iter_us / messages_us, iter_us / hop_us);
}

tensor random_tensor(const shape& s, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.0f, scale);
  tensor t(dtype::f32, s);
  for (auto& v : t.flat<float>())
    v = n(gen);
  return t;
}

/// The most tensor bytes alive at once during `run`, above those alive before it.
int64_t peak_during(const std::function<void()>& run) {
  int64_t base = tensor_memory_statistics().live_bytes;
  reset_tensor_memory_peak();
  run();
  return tensor_memory_statistics().peak_bytes - base;
}

void dynamic_vs_static_rnn() {
  constexpr int steps = 50, batch = 32, hidden = 256, in = 256;
  runtime rt;
  auto xs_value = random_tensor({steps, batch, in}, 1, 1.0f);
  struct model {
    graph g;
    output xs;
    std::vector<output> grads;
  };
  auto build = [&](bool dynamic) {
    auto m = std::make_unique<model>();
    graph& g = m->g;
    m->xs = placeholder(g, dtype::f32, shape{steps, batch, in}, "xs");
    auto w = constant(g, random_tensor({in, hidden}, 2, 0.05f));
    auto u = constant(g, random_tensor({hidden, hidden}, 3, 0.05f));
    auto b = constant(g, random_tensor({hidden}, 4, 0.05f));
    auto h0 = zeros(g, dtype::f32, shape{batch, hidden});
    output all;
    if (dynamic) {
      auto n = constant(g, int32_t(steps));
      auto inputs = tensor_array(g, dtype::f32, n, {.element_shape = shape{batch, in}})
                        .unstack(m->xs);
      tensor_array outs(g, dtype::f32, n, {.element_shape = shape{batch, hidden}});
      auto r = while_loop(
          [&](const std::vector<output>& v) { return less(v[0], n); },
          [&](const std::vector<output>& v) {
            auto h = tanh(matmul(inputs.read(v[0]), w) + matmul(v[1], u) + b);
            return std::vector<output>{v[0] + constant(g, int32_t(1)), h,
                                       outs.with_flow(v[2]).write(v[0], h).flow()};
          },
          {constant(g, int32_t(0)), h0, outs.flow()});
      all = outs.with_flow(r[2]).stack();
    } else {
      auto x_steps = unstack(m->xs, steps);
      std::vector<output> hs;
      output h = h0;
      for (int t = 0; t < steps; ++t) {
        h = tanh(matmul(x_steps[size_t(t)], w) + matmul(h, u) + b);
        hs.push_back(h);
      }
      all = stack(hs);
    }
    auto loss = sum(all * all);
    m->grads = gradients({loss}, {w, u, b});
    return m;
  };
  auto dyn = build(true), stat = build(false);
  session ds(rt, dyn->g), ss(rt, stat->g);
  auto step = [&](session& s, model& m) {
    throw_if_error(s.run({{m.xs, xs_value}}, m.grads).error());
  };
  // Same gradients from both (a benchmark of a wrong answer measures nothing).
  auto a = ds.run({{dyn->xs, xs_value}}, dyn->grads).value();
  auto c = ss.run({{stat->xs, xs_value}}, stat->grads).value();
  for (size_t k = 0; k < a.size(); ++k)
    if (!all_close(a[k], c[k], 1e-3, 1e-3))
      throw std::runtime_error("dynamic_vs_static_rnn: gradients differ");
  for (int r = 0; r < 3; ++r) {
    step(ds, *dyn);
    step(ss, *stat);
  }
  std::vector<double> td, ts;
  for (int r = 0; r < 15; ++r) { // interleaved, so both see the same machine state
    double t0 = now();
    step(ds, *dyn);
    double t1 = now();
    step(ss, *stat);
    td.push_back(t1 - t0);
    ts.push_back(now() - t1);
  }
  std::sort(td.begin(), td.end());
  std::sort(ts.begin(), ts.end());
  double dms = td[td.size() / 2] * 1e3, sms = ts[ts.size() / 2] * 1e3;
  int64_t dpeak = 0, speak = 0;
  for (int r = 0; r < 3; ++r) {
    dpeak = std::max(dpeak, peak_during([&] { step(ds, *dyn); }));
    speak = std::max(speak, peak_during([&] { step(ss, *stat); }));
  }
  // Where the time goes: node runs per step and the time their kernels took in all.
  for (auto* which : {&ds, &ss}) {
    model& m = which == &ds ? *dyn : *stat;
    run_metadata md;
    throw_if_error(which->run({{m.xs, xs_value}}, m.grads, {}, {.trace = true}, &md).error());
    std::map<std::string, std::pair<int, double>> by_op;
    double kernel_ms = 0;
    for (auto& n : md.nodes) {
      double ms = double(n.end_ns - n.start_ns) / 1e6;
      kernel_ms += ms;
      by_op[n.op].first++;
      by_op[n.op].second += ms;
    }
    std::printf("  %s: %zu node runs, %.1f ms in kernels;", which == &ds ? "while_loop" : "unrolled",
                md.nodes.size(), kernel_ms);
    for (auto& [op, v] : by_op)
      if (v.second > 0.3)
        std::printf(" %s %d/%.1fms", op.c_str(), v.first, v.second);
    std::printf("\n");
  }
  std::printf("dynamic_vs_static_rnn: while_loop %.2f ms, unrolled %.2f ms per forward+backward "
              "step; peak tensor memory %.1f MB vs %.1f MB\n",
              dms, sms, double(dpeak) / 1e6, double(speak) / 1e6);
  std::printf("bench dynamic_vs_static_rnn: %.2f step-time ratio (target <= 1.05), %.2f peak "
              "memory ratio (target <= 1)\n",
              dms / sms, double(dpeak) / double(speak));
}

} // namespace

int main(int argc, char** argv) {
  runnel::reexec_with_better_blas_core(argv); // OpenBLAS's own kernels, not its generic ones
  std::string only = argc > 1 ? argv[1] : "";
  if (only.empty() || only == "while_loop_overhead")
    while_loop_overhead();
  if (only.empty() || only == "dynamic_vs_static_rnn")
    dynamic_vs_static_rnn();
  return 0;
}
