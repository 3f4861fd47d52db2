#pragma once
// Shared bits of the benchmarks: timing of the final (measured) run of each Google Benchmark
// function, and the one-line summaries `bench <name>: <figure> <unit> (<ratio>x <reference>)`.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace runnel::bench {

/// Seconds per iteration of each benchmark: the best of all its runs (Google Benchmark calls a
/// function several times; the machines are shared and noisy, and the best run is the one
/// least disturbed).
inline std::map<std::string, double>& timings() {
  static std::map<std::string, double> t;
  return t;
}

/// Times the state's loop body; records seconds per iteration under `name`.
template <class F> void timed_loop(benchmark::State& state, const std::string& name, F&& body) {
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state)
    body();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (state.iterations() > 0) {
    double per = secs / double(state.iterations());
    auto it = timings().find(name);
    if (it == timings().end() || per < it->second)
      timings()[name] = per;
  }
}

/// A summary line computed after all benchmarks ran; returns false if its inputs are missing.
struct summary {
  std::string name;
  std::function<bool(std::string&)> line;
};
inline std::vector<summary>& summaries() {
  static std::vector<summary> s;
  return s;
}

inline bool have(std::initializer_list<const char*> names) {
  for (auto n : names)
    if (!timings().count(n))
      return false;
  return true;
}

inline std::string format_line(const std::string& name, double figure, const char* unit,
                               double ratio, const std::string& reference) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "bench %s: %.3g %s (%.2fx %s)", name.c_str(), figure, unit, ratio,
                reference.c_str());
  return buf;
}

inline int run_main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::printf("\n");
  for (auto& s : summaries()) {
    std::string line;
    if (s.line(line))
      std::printf("%s\n", line.c_str());
  }
  return 0;
}

} // namespace runnel::bench
