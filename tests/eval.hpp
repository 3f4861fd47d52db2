#pragma once
// Test helpers: evaluate outputs of a graph in a fresh session on a shared runtime.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <random>
#include <string>

#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/graph/builder.hpp"

namespace runnel::testing {

/// One runtime for a test binary (starting CAF per test would dominate the run time). It is
/// never destroyed: CAF's own statics are gone by the time static destructors run. CPUs only,
/// on a GPU machine too: what it evaluates is the reference the GPU kernels are checked against.
inline runtime& test_runtime() {
  static runtime* rt = new runtime(runtime_options{.visible_gpus = std::vector<int>{}});
  return *rt;
}

/// Sets (or, with no value, removes) an environment variable for a scope and puts the old value
/// back after: for tests whose subject an environment switch would change (a test of the graph
/// optimizer's rewrites pins RUNNEL_GRAPH_OPTIMIZER off the suite's own setting).
class scoped_env {
public:
  scoped_env(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name))
      old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

private:
  const char* name_;
  std::optional<std::string> old_;
};

/// Runs `fetches` and returns their values; fails the test on an error.
inline std::vector<tensor> eval(const std::vector<output>& fetches, const feed_list& feeds = {}) {
  session s(test_runtime(), fetches.at(0).owner());
  auto r = s.run(feeds, fetches);
  INFO((r.ok() ? std::string("ok") : r.error().to_string()));
  REQUIRE(r.ok());
  return std::move(r).value();
}
inline tensor eval1(output o, const feed_list& feeds = {}) {
  return eval({o}, feeds)[0];
}

/// Runs `fetch` and returns the error (the test fails if it succeeds).
inline status eval_error(output o, const feed_list& feeds = {}) {
  session s(test_runtime(), o.owner());
  auto r = s.run(feeds, {o});
  REQUIRE_FALSE(r.ok());
  return r.error();
}

/// A float32 tensor of shape `s`, uniform in [-1, 1).
inline tensor uniform_tensor(std::mt19937& rng, const shape& s) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  tensor t(dtype::f32, s);
  for (auto& v : t.flat<float>())
    v = d(rng);
  return t;
}

/// float64 values uniform in [-1, 1), seeded (for gradient checks by central differences).
inline tensor random_f64(const shape& s, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  tensor t(dtype::f64, s);
  for (auto& v : t.flat<double>())
    v = u(gen);
  return t;
}

template <class T> tensor vals(shape s, std::vector<T> v) {
  return tensor::from_values<T>(std::move(s), std::move(v));
}

/// CHECKs that `a` equals `b` exactly (printing both on failure).
inline void check_equal(const tensor& a, const tensor& b) {
  INFO("got      " << a.to_string(32));
  INFO("expected " << b.to_string(32));
  CHECK(equal(a, b));
}
inline void check_close(const tensor& a, const tensor& b, double rtol = 1e-5, double atol = 1e-6) {
  INFO("got      " << a.to_string(32));
  INFO("expected " << b.to_string(32));
  CHECK(all_close(a, b, rtol, atol));
}

} // namespace runnel::testing
