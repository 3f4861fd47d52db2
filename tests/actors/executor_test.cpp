// Devices with exclusive compute budgets: the executor itself, and kernels that run on it.
#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "runnel/actors/exec/device_executor.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

/// Starts `steps` steps of `s` at once, step k fed `feeds(k)`, and returns their results in
/// step order: as many in flight as the session lets.
std::vector<result<std::vector<tensor>>> run_at_once(session& s, int steps,
                                                     const std::function<feed_list(int)>& feeds,
                                                     const std::vector<output>& fetches) {
  std::vector<std::promise<result<std::vector<tensor>>>> done(static_cast<size_t>(steps));
  for (int k = 0; k < steps; ++k)
    s.run_callback(feeds(k), fetches, {}, [&done, k](result<std::vector<tensor>> r) {
      done[size_t(k)].set_value(std::move(r));
    });
  std::vector<result<std::vector<tensor>>> results;
  for (auto& d : done)
    results.push_back(d.get_future().get());
  return results;
}

} // namespace

TEST_CASE("a device executor never runs more tasks at once than its budget", "[actors]") {
  for (int threads : {1, 2}) {
    std::atomic<int> running{0}, most{0}, ran{0};
    std::vector<int> order;
    std::mutex order_mu;
    {
      device_executor ex("cpu:test", threads);
      CHECK(ex.num_threads() == threads);
      for (int i = 0; i < 200; ++i)
        ex.post([&, i] {
          int now = running.fetch_add(1) + 1;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::sleep_for(std::chrono::microseconds(20));
          {
            std::lock_guard lock(order_mu);
            order.push_back(i);
          }
          running.fetch_sub(1);
          ran.fetch_add(1);
        });
    } // the destructor runs what is still queued, then joins
    CHECK(ran.load() == 200);
    CHECK(most.load() <= threads);
    if (threads == 1)
      for (int i = 0; i < 200; ++i)
        CHECK(order[size_t(i)] == i);
  }
}

namespace {

tensor random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  tensor t(dtype::f32, shape{rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i)
    t.data<float>()[i] = dist(gen);
  return t;
}

// op(a) @ op(b), computed naively in double.
std::vector<double> reference_matmul(const tensor& a, const tensor& b, bool ta, bool tb) {
  int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  int64_t n = tb ? b.dim(0) : b.dim(1);
  auto at = [&](int64_t i, int64_t p) {
    return double(ta ? a.data<float>()[p * a.dim(1) + i] : a.data<float>()[i * a.dim(1) + p]);
  };
  auto bt = [&](int64_t p, int64_t j) {
    return double(tb ? b.data<float>()[j * b.dim(1) + p] : b.data<float>()[p * b.dim(1) + j]);
  };
  std::vector<double> out(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += at(i, p) * bt(p, j);
      out[size_t(i * n + j)] = sum;
    }
  return out;
}

} // namespace

TEST_CASE("matmuls on devices with budgets of two threads split rows or columns and compute "
          "exactly",
          "[actors]") {
  // Two threads per device: the executor's thread plus one in the device's pool, so MatMul
  // splits the product over the pool (OpenBLAS runs single-threaded under every runtime): by
  // rows when it has more rows than columns, by columns otherwise.
  static runtime* rt = new runtime(runtime_options{.cpu_devices = 2, .device_threads = 2});
  CHECK(rt->device_threads() == 2);
  CHECK(blas_threads() == 1);
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{301, 97, 130},
                         std::tuple<int64_t, int64_t, int64_t>{40, 97, 701}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        CAPTURE(m, n, ta, tb); // sizes not a multiple of the blocks
        tensor av = ta ? random_matrix(k, m, 1) : random_matrix(m, k, 1);
        tensor bv = tb ? random_matrix(n, k, 2) : random_matrix(k, n, 2);
        graph g;
        auto a = placeholder(g, dtype::f32, av.shape(), "a");
        auto b = placeholder(g, dtype::f32, bv.shape(), "b");
        output on0, on1;
        {
          auto d = g.device("/cpu:0");
          on0 = matmul(a, b, {ta, tb});
        }
        {
          auto d = g.device("/cpu:1");
          on1 = matmul(a, b, {ta, tb});
        }
        session s(*rt, g);
        // Many steps in flight: the offloaded kernels of different steps overlap.
        std::vector<std::future<result<std::vector<tensor>>>> futures;
        for (int i = 0; i < 8; ++i)
          futures.push_back(s.run_async({{a, av}, {b, bv}}, {on0, on1}));
        auto want = reference_matmul(av, bv, ta, tb);
        for (auto& f : futures) {
          auto r = f.get();
          REQUIRE(r.ok());
          for (auto& t : r.value()) {
            REQUIRE(t.shape() == shape{m, n});
            double worst = 0;
            for (int64_t i = 0; i < m * n; ++i)
              worst = std::max(worst, std::abs(double(t.data<float>()[i]) - want[size_t(i)]));
            CHECK(worst < 1e-4);
          }
        }
      }
}

TEST_CASE("an offloaded kernel's error fails the step, names the node, and the session goes on",
          "[actors]") {
  static runtime* rt = new runtime(runtime_options{.cpu_devices = 2, .device_threads = 1});
  graph g;
  auto a = placeholder(g, dtype::f32, shape{-1, -1}, "a");
  auto b = placeholder(g, dtype::f32, shape{-1, -1}, "b");
  output y;
  {
    auto d = g.device("/cpu:1");
    y = matmul(a, b, {}, "product");
  }
  session s(*rt, g);
  auto bad = s.run({{a, random_matrix(100, 64, 3)}, {b, random_matrix(65, 100, 4)}}, {y});
  REQUIRE(!bad.ok());
  CHECK(bad.error().code() == error_code::invalid_argument);
  CHECK_THAT(bad.error().to_string(), Catch::Contains("node 'product'"));
  CHECK_THAT(bad.error().to_string(), Catch::Contains("size-incompatible"));
  auto good = s.run({{a, random_matrix(100, 64, 3)}, {b, random_matrix(64, 100, 4)}}, {y});
  REQUIRE(good.ok());
  CHECK(good.value()[0].shape() == shape{100, 100});
}

TEST_CASE("cheap nodes run inline in their producer's turn: chains compute right with steps in "
          "flight, and traces show every node",
          "[actors]") {
  // A chain of small element-wise nodes, each waiting on the one before (the rest constants),
  // fanning out at the end; the optimizer off so that every node stays a node.
  graph g;
  auto x = placeholder(g, dtype::f32, shape{4}, "x");
  output y = x;
  for (int i = 0; i < 200; ++i)
    y = add(y, constant(g, tensor::vector<float>({1, 1, 1, 1})), "add_" + std::to_string(i));
  auto a = mul(y, constant(g, tensor::scalar<float>(2.f)), "twice");
  auto b = sub(y, constant(g, tensor::scalar<float>(200.f)), "less");
  session s(test_runtime(), g, {.max_in_flight_steps = 8,
                                .optimizer = graph_optimizer_options::none()});
  auto results =
      run_at_once(s, 64,
                  [&](int k) {
                    return feed_list{{x, tensor::vector<float>({float(k), 0, -float(k), 1})}};
                  },
                  {a, b});
  for (int k = 0; k < 64; ++k) {
    auto& r = results[size_t(k)];
    REQUIRE(r);
    check_equal((*r)[0], tensor::vector<float>({2.f * (k + 200), 400, 2.f * (200 - k), 402}));
    check_equal((*r)[1], tensor::vector<float>({float(k), 0, -float(k), 1}));
  }
  run_metadata md;
  REQUIRE(s.run({{x, tensor::vector<float>({0, 0, 0, 0})}}, {a, b}, {}, {.trace = true}, &md));
  std::set<std::string> traced;
  for (auto& n : md.nodes)
    traced.insert(n.node);
  for (int i = 0; i < 200; ++i)
    CHECK(traced.count("add_" + std::to_string(i)) == 1);
  CHECK(traced.count("twice") == 1);
  CHECK(traced.count("less") == 1);
}

TEST_CASE("expensive consumers are posted to their device's executor by their producer: chains "
          "within and across devices compute right with steps in flight",
          "[actors]") {
  // Matrix products of 64x64 (16 KiB inputs: they go to the executors), each waiting on the one
  // before, the weights constants; the chain changes device every third product, so some
  // consumers are fed by a Recv. Without inline firing every node fires by message: the
  // reference.
  static runtime* rt = new runtime(runtime_options{.cpu_devices = 2, .device_threads = 1});
  graph g;
  auto x = placeholder(g, dtype::f32, shape{64, 64}, "x");
  output y = x;
  for (int i = 0; i < 24; ++i) {
    auto d = g.device((i / 3) % 2 ? "/cpu:1" : "/cpu:0");
    auto w = constant(g, random_matrix(64, 64, uint32_t(10 + i)));
    y = tanh(matmul(y, w, {}, "product_" + std::to_string(i)));
  }
  session direct(*rt, g, {.max_in_flight_steps = 8, .optimizer = graph_optimizer_options::none()});
  session messages(*rt, g,
                   {.max_in_flight_steps = 8,
                    .optimizer = graph_optimizer_options::none(),
                    .inline_firing = false});
  auto results = run_at_once(direct, 32,
                             [&](int k) {
                               return feed_list{{x, random_matrix(64, 64, uint32_t(100 + k))}};
                             },
                             {y});
  for (int k = 0; k < 32; ++k) {
    auto& r = results[size_t(k)];
    REQUIRE(r);
    auto want = messages.run({{x, random_matrix(64, 64, uint32_t(100 + k))}}, {y});
    REQUIRE(want);
    check_equal((*r)[0], (*want)[0]);
  }
  run_metadata md;
  REQUIRE(direct.run({{x, random_matrix(64, 64, 7)}}, {y}, {}, {.trace = true}, &md));
  std::set<std::string> traced;
  for (auto& n : md.nodes)
    if (n.op == "MatMul")
      traced.insert(n.node + " on " + n.device.substr(n.device.size() - 5));
  for (int i = 0; i < 24; ++i)
    CHECK(traced.count("product_" + std::to_string(i) +
                       ((i / 3) % 2 ? " on cpu:1" : " on cpu:0")) == 1);
}

TEST_CASE("cheap consumers behind a Recv between this process's devices run in the producer's "
          "turn: a chain alternating devices computes right with steps in flight, and a step "
          "that fails between them ends without leaving its Recvs waiting",
          "[actors]") {
  // Every edge of the chain crosses devices, so every node but the first waits behind a Recv
  // that the step's caller starts and the producer's thread completes; the last node reshapes
  // to a fed shape, which a step can get wrong.
  static runtime* rt = new runtime(runtime_options{.cpu_devices = 2, .device_threads = 1});
  graph g;
  auto x = placeholder(g, dtype::f32, shape{4}, "x");
  auto dims = placeholder(g, dtype::i64, shape{2}, "dims");
  output y = x;
  for (int i = 0; i < 60; ++i) {
    auto d = g.device(i % 2 ? "/cpu:1" : "/cpu:0");
    y = add(y, constant(g, tensor::vector<float>({1, 2, 3, 4})), "add_" + std::to_string(i));
  }
  output z;
  {
    auto d = g.device("/cpu:0");
    z = reshape(y, dims, "shaped");
  }
  session s(*rt, g, {.max_in_flight_steps = 8, .optimizer = graph_optimizer_options::none()});
  auto good = tensor::vector<int64_t>({2, 2});
  // Every fourth step asks for a shape its 4 elements do not fill: only it fails.
  auto results =
      run_at_once(s, 48,
                  [&](int k) {
                    return feed_list{{x, tensor::vector<float>({float(k), 0, -float(k), 1})},
                                     {dims, k % 4 == 3 ? tensor::vector<int64_t>({3, 2}) : good}};
                  },
                  {z});
  for (int k = 0; k < 48; ++k) {
    auto& r = results[size_t(k)];
    if (k % 4 == 3) {
      REQUIRE_FALSE(r);
      CHECK_THAT(r.error().message(), Catch::Contains("shaped"));
      continue;
    }
    REQUIRE(r);
    check_equal((*r)[0],
                tensor::from_values<float>(shape{2, 2}, {float(k) + 60, 120, 180 - float(k), 241}));
  }
  run_metadata md;
  REQUIRE(s.run({{x, tensor::vector<float>({0, 0, 0, 0})}, {dims, good}}, {z}, {}, {.trace = true},
                &md));
  std::set<std::string> traced;
  int recvs = 0;
  for (auto& n : md.nodes) {
    traced.insert(n.node);
    recvs += n.op == "_Recv";
  }
  for (int i = 0; i < 60; ++i)
    CHECK(traced.count("add_" + std::to_string(i)) == 1);
  CHECK(recvs == 60);
}

TEST_CASE("expensive consumers with several inputs are posted by the producer of their last "
          "input: fan-ins within and across devices compute right with steps in flight, and a "
          "failed step's inputs waiting in them are dropped",
          "[actors]") {
  // Each stage computes two products of the stage before and multiplies them: that product
  // waits for two inputs of 16 KiB, delivered from its own device's executor or through a Recv
  // from the other device. A stage's second branch reshapes to a fed shape, which a step can
  // get wrong while the first branch's value already waits in the product. Without inline
  // firing every node fires by message: the reference.
  static runtime* rt = new runtime(runtime_options{.cpu_devices = 2, .device_threads = 1});
  graph g;
  auto x = placeholder(g, dtype::f32, shape{64, 64}, "x");
  auto dims = placeholder(g, dtype::i64, shape{2}, "dims");
  output p = x;
  for (int i = 0; i < 8; ++i) {
    auto d = g.device(i % 2 ? "/cpu:1" : "/cpu:0");
    auto a = tanh(matmul(p, constant(g, random_matrix(64, 64, uint32_t(20 + i)))));
    output b;
    {
      auto other = g.device(i % 3 ? "/cpu:0" : "/cpu:1");
      b = tanh(matmul(p, constant(g, random_matrix(64, 64, uint32_t(40 + i)))));
      if (i == 5)
        b = reshape(b, dims, "reshaped");
    }
    p = tanh(matmul(a, b, {}, "fan_in_" + std::to_string(i)));
  }
  session gathered(*rt, g,
                   {.max_in_flight_steps = 8, .optimizer = graph_optimizer_options::none()});
  session messages(*rt, g,
                   {.max_in_flight_steps = 8,
                    .optimizer = graph_optimizer_options::none(),
                    .inline_firing = false});
  auto good = tensor::vector<int64_t>({64, 64});
  // Every fourth step asks for a shape its elements do not fill: only it fails.
  auto results =
      run_at_once(gathered, 32,
                  [&](int k) {
                    return feed_list{{x, random_matrix(64, 64, uint32_t(100 + k))},
                                     {dims, k % 4 == 1 ? tensor::vector<int64_t>({32, 64}) : good}};
                  },
                  {p});
  for (int k = 0; k < 32; ++k) {
    auto& r = results[size_t(k)];
    if (k % 4 == 1) {
      REQUIRE_FALSE(r);
      CHECK_THAT(r.error().message(), Catch::Contains("reshaped"));
      continue;
    }
    REQUIRE(r);
    auto want = messages.run({{x, random_matrix(64, 64, uint32_t(100 + k))}, {dims, good}}, {p});
    REQUIRE(want);
    check_equal((*r)[0], (*want)[0]);
  }
  run_metadata md;
  REQUIRE(
      gathered.run({{x, random_matrix(64, 64, 7)}, {dims, good}}, {p}, {}, {.trace = true}, &md));
  std::set<std::string> traced;
  for (auto& n : md.nodes)
    traced.insert(n.node);
  for (int i = 0; i < 8; ++i)
    CHECK(traced.count("fan_in_" + std::to_string(i)) == 1);
  gathered.close(); // waits for every step: none is left holding a gathered input
  messages.close();
}
