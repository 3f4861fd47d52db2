// Control-flow benchmarks:
//   while_loop_overhead  µs per iteration of a 10,000-iteration while_loop of `i + 1` (target
//                        <= 3 µs), beside the µs one node hop costs in a static chain of Adds
//                        run in the same process (the executor's own floor)
// Prints `bench <name>: <figure> <unit> (<ratio>x <reference>)`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "actors/session.hpp"
#include "ops/control_flow.hpp"

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
  std::printf("while_loop_overhead: %.2f us per iteration (%d iterations in %.1f ms); static "
              "node hop %.2f us\n",
              iter_us, iterations, loop_s * 1e3, hop_us);
  std::printf("bench while_loop_overhead: %.2f us/iteration (%.2fx the 3 us target; %.1fx a "
              "static node hop)\n",
              iter_us, iter_us / 3.0, iter_us / hop_us);
}

} // namespace

int main() {
  while_loop_overhead();
  return 0;
}
