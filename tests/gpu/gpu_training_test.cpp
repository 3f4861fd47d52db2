// The GPU training path against the CPU, through sessions: the same graph runs on a CPU-only
// runtime and on one with the GPU, and every fetched value must agree. Variables live in GPU
// memory there (VariableV2, Assign and the updates have GPU kernels), so these check the
// optimizers' Apply* and SparseApply* kernels, gathers, segment sums and scatters, the fused
// LSTM block and its gradient, checkpoints of GPU variables and device-to-device transfers.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "runnel/actors/state/saver.hpp"
#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/lstm_block.hpp"
#include "runnel/ops/gpu/gpu_info.hpp"
#include "runnel/tests/gpu/gpu_test_util.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

runtime_options cpu_only() {
  return runtime_options{.visible_gpus = std::vector<int>{}};
}

runtime& cpu_runtime() {
  static runtime* rt = new runtime(cpu_only());
  return *rt;
}

/// Where each node ran in a traced step: node name -> {op, device}. (Check ops by type: the
/// transfers the placer adds carry their consumer's name, "_recv/.../ApplyAdam_ctrl_to_0".)
std::map<std::string, std::pair<std::string, std::string>>
placement_of(session& s, const feed_list& feeds, const std::vector<operation>& targets) {
  run_metadata md;
  auto r = s.run(feeds, {}, targets, {.trace = true}, &md);
  REQUIRE(r.ok());
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (auto& n : md.nodes)
    out[n.node] = {n.op, n.device};
  return out;
}

bool on_gpu(const std::string& device) {
  return device.find("device:gpu:") != std::string::npos;
}

/// Runs `steps` of `targets` with `feeds(step)` on both runtimes, then fetches `fetches` (fed
/// `feeds(steps)`, for fetches that read a placeholder).
std::pair<std::vector<tensor>, std::vector<tensor>> run_both(
    graph& g, const std::function<feed_list(int)>& feeds, const std::vector<operation>& targets,
    const std::vector<output>& fetches, int steps) {
  std::vector<tensor> results[2];
  // Fresh runtimes: variables are per runtime, and one named like an earlier test's but of
  // another dtype would refuse its initial value.
  runtime cpu_rt(cpu_only()), gpu_rt;
  REQUIRE_FALSE(gpu_rt.gpus().empty());
  runtime* rts[2] = {&cpu_rt, &gpu_rt};
  for (int k = 0; k < 2; ++k) {
    session s(*rts[k], g);
    REQUIRE(s.run({global_variables_initializer(g)}).ok());
    for (int i = 0; i < steps; ++i) {
      auto r = s.run(feeds(i), {}, targets);
      INFO((r.ok() ? std::string() : r.error().to_string()));
      REQUIRE(r.ok());
    }
    auto r = s.run(feeds(steps), fetches);
    INFO((r.ok() ? std::string() : r.error().to_string()));
    REQUIRE(r.ok());
    results[k] = std::move(r).value();
  }
  return {results[0], results[1]};
}

} // namespace

TEST_CASE("every optimizer updates GPU-resident variables as the CPU does", "[.gpu][train]") {
  struct opt_case {
    const char* name;
    std::function<std::unique_ptr<optimizer>()> make;
  };
  std::vector<opt_case> cases{
      {"sgd", [] { return std::make_unique<gradient_descent_optimizer>(0.1); }},
      {"momentum", [] { return std::make_unique<momentum_optimizer>(0.1, 0.9); }},
      {"nesterov", [] { return std::make_unique<momentum_optimizer>(0.1, 0.9, true); }},
      {"adagrad", [] { return std::make_unique<adagrad_optimizer>(0.1); }},
      {"rmsprop", [] { return std::make_unique<rmsprop_optimizer>(0.01, 0.9, 0.5); }},
      {"adam", [] { return std::make_unique<adam_optimizer>(0.01); }}};
  for (dtype t : {dtype::f32, dtype::f64})
    for (auto& c : cases) {
      INFO(c.name << " " << name(t));
      graph g;
      auto w = variable(g, constant(g, random_host(t, {37, 5}, 1)), "w");
      auto grad = placeholder(g, t, {37, 5}, "grad");
      auto opt = c.make();
      auto step = variable(g, constant(g, int64_t(0)), "global_step", false);
      auto train = opt->apply_gradients({{grad, w.ref}}, &step);
      auto feeds = [&](int i) {
        return feed_list{{grad, random_host(t, {37, 5}, uint32_t(10 + i))}};
      };
      // The update must run where the variable lives: on the GPU.
      {
        runtime gpu_rt;
        session s(gpu_rt, g);
        REQUIRE(s.run({global_variables_initializer(g)}).ok());
        auto where = placement_of(s, feeds(0), {train});
        int applies = 0;
        for (auto& [node, at] : where)
          if (at.first.rfind("Apply", 0) == 0) {
            INFO(node << " (" << at.first << ") ran on " << at.second);
            CHECK(on_gpu(at.second));
            ++applies;
          }
        CHECK(applies == 1);
      }
      auto [cpu, gpu] = run_both(g, feeds, {train}, {w.value, step.value}, 5);
      check_close(gpu[0], cpu[0], t == dtype::f32 ? 2e-5 : 1e-12, 1e-6);
      check_equal(gpu[1], cpu[1]);
    }
}

TEST_CASE("a GPU's Adam updates as one multi-tensor update match the CPU's separate ones",
          "[.gpu][train]") {
  // 19 variables (more than one launch's 16), one of a million elements (many blocks per
  // variable), the others small and of odd sizes: the graph optimizer makes their ApplyAdam
  // nodes one _MultiApplyAdam on the GPU; the CPU runs them apart.
  for (dtype t : {dtype::f32, dtype::f64}) {
    INFO(name(t));
    graph g;
    std::vector<std::pair<gradient_value, output>> grads_and_vars;
    std::vector<output> values, grads;
    for (int k = 0; k < 19; ++k) {
      shape s = k == 0 ? shape{1000, 1000} : shape{int64_t(3 + 7 * k), int64_t(1 + k % 5)};
      auto w = variable(g, constant(g, random_host(t, s, uint32_t(100 + k))),
                        "mw" + std::to_string(k));
      grads.push_back(placeholder(g, t, s, "mgrad" + std::to_string(k)));
      grads_and_vars.push_back({grads.back(), w.ref});
      values.push_back(w.value);
    }
    adam_optimizer opt(0.01);
    auto train = opt.apply_gradients(grads_and_vars);
    auto feeds = [&](int i) {
      feed_list f;
      for (size_t k = 0; k < grads.size(); ++k)
        f.push_back({grads[k], random_host(t, grads[k].shape(), uint32_t(1000 * i + int(k)))});
      return f;
    };
    {
      runtime gpu_rt;
      session s(gpu_rt, g);
      REQUIRE(s.run({global_variables_initializer(g)}).ok());
      int multi = 0, single = 0;
      for (auto& [node, at] : placement_of(s, feeds(0), {train})) {
        multi += at.first == "_MultiApplyAdam" && on_gpu(at.second);
        single += at.first == "ApplyAdam";
      }
      CHECK(multi == 1);
      CHECK(single == 0);
    }
    auto [cpu, gpu] = run_both(g, feeds, {train}, values, 5);
    for (size_t k = 0; k < values.size(); ++k) {
      INFO("variable " << k);
      check_close(gpu[k], cpu[k], t == dtype::f32 ? 2e-5 : 1e-12, 1e-6);
    }
  }
}

TEST_CASE("sparse updates of GPU embeddings match the CPU, duplicate ids included",
          "[.gpu][train]") {
  struct opt_case {
    const char* name;
    std::function<std::unique_ptr<optimizer>()> make;
  };
  std::vector<opt_case> cases{
      {"sgd", [] { return std::make_unique<gradient_descent_optimizer>(0.5); }},
      {"momentum", [] { return std::make_unique<momentum_optimizer>(0.1, 0.9); }},
      {"adagrad", [] { return std::make_unique<adagrad_optimizer>(0.1); }},
      {"rmsprop", [] { return std::make_unique<rmsprop_optimizer>(0.01, 0.9, 0.5); }},
      {"adam", [] { return std::make_unique<adam_optimizer>(0.01); }},
      {"lazy_adam", [] { return std::make_unique<lazy_adam_optimizer>(0.01); }}};
  for (auto& c : cases) {
    INFO(c.name);
    graph g;
    auto table = variable(g, constant(g, random_host(dtype::f32, {50, 8}, 3)), "table");
    auto ids = placeholder(g, dtype::i32, {-1}, "ids");
    auto target = placeholder(g, dtype::f32, {-1, 8}, "target");
    auto looked = embedding_lookup(table.value, ids);
    auto loss = sum(square(looked - target));
    auto opt = c.make();
    auto train = opt->minimize(loss);
    auto feeds = [&](int i) {
      // Duplicates (7 and 3 twice) and rows never looked up.
      std::vector<int32_t> v{7, 3, 41, 7, int32_t(i), 3, 0};
      return feed_list{{ids, tensor::vector<int32_t>(v)},
                       {target, random_host(dtype::f32, {7, 8}, uint32_t(20 + i))}};
    };
    auto [cpu, gpu] = run_both(g, feeds, {train}, {table.value}, 4);
    check_close(gpu[0], cpu[0], 2e-5, 1e-6);
  }
}

TEST_CASE("gathers, segment sums and scatters on the GPU match the CPU", "[.gpu][train]") {
  graph g;
  auto params = constant(g, random_host(dtype::f32, {6, 4, 3}, 5));
  auto idx = placeholder(g, dtype::i64, {-1}, "idx");
  auto g0 = gather(params, idx, 0), g1 = gather(params, idx, 1);
  auto seg = unsorted_segment_sum(constant(g, random_host(dtype::f32, {5, 3}, 6)),
                                  constant(g, tensor::vector<int32_t>({2, -1, 2, 0, 4})),
                                  constant(g, int32_t(6)));
  auto v = variable(g, constant(g, random_host(dtype::f32, {6, 3}, 7)), "scattered");
  auto updates = constant(g, random_host(dtype::f32, {4, 3}, 8));
  auto rows = constant(g, tensor::vector<int32_t>({1, 4, 1, 5}));
  auto add = scatter_add(v, rows, updates), sub = scatter_sub(v, rows, updates);
  auto upd = scatter_update(v, rows, updates);
  auto feeds = [&](int) { return feed_list{{idx, tensor::vector<int64_t>({3, 0, 3, 2})}}; };
  for (auto op : {add, sub, upd}) {
    auto [cpu, gpu] = run_both(g, feeds, {operation(op)}, {g0, g1, seg, v.value}, 2);
    for (size_t i = 0; i < cpu.size(); ++i)
      check_close(gpu[i], cpu[i], 1e-6, 1e-6);
  }
  // An index out of range names the node and the index, on the GPU too.
  runtime gpu_rt;
  session s(gpu_rt, g);
  auto bad = s.run({{idx, tensor::vector<int64_t>({0, 6})}}, {g0});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().to_string(), Catch::Contains("indices[1] = 6"));
}

namespace {

/// The fetches (a fused LSTM op's outputs and gradients) on a GPU runtime against the CPU's, and
/// `op` placed on the GPU.
void check_lstm_on_gpu(graph& g, const std::vector<output>& fetches, output h, const char* op) {
  session cpu_s(cpu_runtime(), g);
  runtime gpu_rt;
  session gpu_s(gpu_rt, g);
  auto want = cpu_s.run({}, fetches).value();
  auto got = gpu_s.run({}, fetches).value();
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("fetch " << i);
    check_close(got[i], want[i], 1e-4, 1e-5);
  }
  bool on_the_gpu = false;
  for (auto& [node, at] : placement_of(gpu_s, {}, {operation(h)}))
    on_the_gpu |= at.first == op && on_gpu(at.second);
  CHECK(on_the_gpu);
}

} // namespace

TEST_CASE("the fused LSTM block and its gradient on the GPU match the CPU", "[.gpu][lstm]") {
  for (bool peephole : {false, true})
    for (double clip : {-1.0, 0.5}) {
      INFO("peephole " << peephole << " clip " << clip);
      graph g;
      int64_t batch = 17, input = 9, cell = 33;
      auto x = constant(g, random_host(dtype::f32, {batch, input}, 30, -1, 1));
      auto c = constant(g, random_host(dtype::f32, {batch, cell}, 31, -1, 1));
      auto h = constant(g, random_host(dtype::f32, {batch, cell}, 32, -1, 1));
      auto w = constant(g, random_host(dtype::f32, {input + cell, 4 * cell}, 33, -0.3, 0.3));
      auto b = constant(g, random_host(dtype::f32, {4 * cell}, 34, -0.5, 0.5));
      auto wci = constant(g, random_host(dtype::f32, {cell}, 35, -0.5, 0.5));
      auto wcf = constant(g, random_host(dtype::f32, {cell}, 36, -0.5, 0.5));
      auto wco = constant(g, random_host(dtype::f32, {cell}, 37, -0.5, 0.5));
      auto out = lstm_block_cell(x, c, h, w, b,
                                 {.forget_bias = 1.0, .cell_clip = clip, .use_peephole = peephole},
                                 wci, wcf, wco);
      auto dh = constant(g, random_host(dtype::f32, {batch, cell}, 38));
      auto dc = constant(g, random_host(dtype::f32, {batch, cell}, 39));
      std::vector<output> wrt{x, c, h, w, b};
      if (peephole)
        wrt.insert(wrt.end(), {wci, wcf, wco});
      auto grads = gradients({out.h, out.cs}, wrt, {dh, dc});
      std::vector<output> fetches{out.i, out.cs, out.f, out.o, out.ci, out.co, out.h};
      fetches.insert(fetches.end(), grads.begin(), grads.end());
      check_lstm_on_gpu(g, fetches, out.h, "LSTMBlockCell");
    }
}

TEST_CASE("BlockLSTM and its gradient on the GPU match the CPU", "[.gpu][lstm]") {
  for (bool peephole : {false, true})
    for (double clip : {-1.0, 0.5}) {
      INFO("peephole " << peephole << " clip " << clip);
      graph g;
      int64_t time = 7, live = 5, batch = 6, input = 9, cell = 33;
      auto x = constant(g, random_host(dtype::f32, {time, batch, input}, 40, -1, 1));
      auto c = constant(g, random_host(dtype::f32, {batch, cell}, 41, -1, 1));
      auto h = constant(g, random_host(dtype::f32, {batch, cell}, 42, -1, 1));
      auto w = constant(g, random_host(dtype::f32, {input + cell, 4 * cell}, 43, -0.3, 0.3));
      auto b = constant(g, random_host(dtype::f32, {4 * cell}, 44, -0.5, 0.5));
      auto wci = constant(g, random_host(dtype::f32, {cell}, 45, -0.5, 0.5));
      auto wcf = constant(g, random_host(dtype::f32, {cell}, 46, -0.5, 0.5));
      auto wco = constant(g, random_host(dtype::f32, {cell}, 47, -0.5, 0.5));
      auto out = block_lstm(constant(g, live), x, c, h, w, b,
                            {.forget_bias = 1.0, .cell_clip = clip, .use_peephole = peephole},
                            wci, wcf, wco);
      auto dh = constant(g, random_host(dtype::f32, {time, batch, cell}, 48));
      auto dc = constant(g, random_host(dtype::f32, {time, batch, cell}, 49));
      std::vector<output> wrt{x, c, h, w, b};
      if (peephole)
        wrt.insert(wrt.end(), {wci, wcf, wco});
      auto grads = gradients({out.h, out.cs}, wrt, {dh, dc});
      std::vector<output> fetches{out.i, out.cs, out.f, out.o, out.ci, out.co, out.h};
      fetches.insert(fetches.end(), grads.begin(), grads.end());
      check_lstm_on_gpu(g, fetches, out.h, "BlockLSTM");
    }
}

TEST_CASE("BlockLSTM's launches replayed as a CUDA graph match the CPU on fresh inputs",
          "[.gpu][lstm]") {
  // Each step's feeds are new values at new addresses; the nodes' steady buffers (copies of the
  // inputs that moved, their own outputs) keep the launches' addresses, so from the fourth step
  // on they replay the graphs the third captured (the first two go direct: first sight, then
  // the inputs' first move).
  graph g;
  int64_t time = 6, batch = 5, input = 7, cell = 24;
  auto x = placeholder(g, dtype::f32, {time, batch, input}, "x");
  auto c = placeholder(g, dtype::f32, {batch, cell}, "c");
  auto h = placeholder(g, dtype::f32, {batch, cell}, "h");
  auto dh = placeholder(g, dtype::f32, {time, batch, cell}, "dh");
  auto w = constant(g, random_host(dtype::f32, {input + cell, 4 * cell}, 50, -0.3, 0.3));
  auto b = constant(g, random_host(dtype::f32, {4 * cell}, 51, -0.5, 0.5));
  auto out = block_lstm(constant(g, time), x, c, h, w, b, {.forget_bias = 1.0});
  auto grads = gradients({out.h}, {x, c, h, w, b}, {dh});
  std::vector<output> fetches{out.cs, out.h};
  fetches.insert(fetches.end(), grads.begin(), grads.end());
  for (bool graphs : {true, false}) {
    INFO((graphs ? "CUDA graphs on" : "RUNNEL_CUDA_GRAPHS=off"));
    if (!graphs)
      setenv("RUNNEL_CUDA_GRAPHS", "off", 1);
    session cpu_s(cpu_runtime(), g);
    runtime gpu_rt; // a new GPU context: it reads the switch
    session gpu_s(gpu_rt, g);
    auto before = gpu_context::graph_launches();
    for (uint32_t step = 0; step < 6; ++step) {
      INFO("step " << step);
      feed_list feeds{{x, random_host(dtype::f32, {time, batch, input}, 60 + step, -1, 1)},
                      {c, random_host(dtype::f32, {batch, cell}, 70 + step, -1, 1)},
                      {h, random_host(dtype::f32, {batch, cell}, 80 + step, -1, 1)},
                      {dh, random_host(dtype::f32, {time, batch, cell}, 90 + step)}};
      auto want = cpu_s.run(feeds, fetches).value();
      auto got = gpu_s.run(feeds, fetches).value();
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("fetch " << i);
        check_close(got[i], want[i], 1e-4, 1e-5);
      }
    }
    auto after = gpu_context::graph_launches();
    if (graphs) {
      CHECK(after.captured > before.captured);
      CHECK(after.replayed >= before.replayed + 4); // BlockLSTM and its gradient, steps 4 to 6
    } else {
      CHECK(after.captured == before.captured);
      CHECK(after.direct >= before.direct + 12);
    }
    unsetenv("RUNNEL_CUDA_GRAPHS");
  }
}

TEST_CASE("a checkpoint of GPU variables restores them, on the GPU and on a CPU", "[.gpu][train]") {
  auto dir = std::filesystem::temp_directory_path() / "runnel_gpu_ckpt";
  std::filesystem::remove_all(dir);
  graph g;
  auto w = variable(g, constant(g, random_host(dtype::f32, {64, 32}, 40)), "w");
  auto grad = constant(g, random_host(dtype::f32, {64, 32}, 41));
  adam_optimizer opt(0.01);
  auto train = opt.apply_gradients({{grad, w.ref}});
  saver sv(g);
  tensor trained;
  std::string path; // save writes prefix.h5 and says so
  {
    runtime gpu_rt;
    session s(gpu_rt, g);
    REQUIRE(s.run({global_variables_initializer(g)}).ok());
    for (int i = 0; i < 3; ++i)
      REQUIRE(s.run({}, {}, {train}).ok());
    trained = s.run({}, {w.value}).value()[0];
    auto saved = sv.save(s, (dir / "model").string());
    INFO((saved.ok() ? std::string() : saved.error().to_string()));
    REQUIRE(saved.ok());
    path = saved.value();
  }
  for (bool gpu : {true, false}) {
    INFO((gpu ? "restored on the GPU" : "restored on a CPU"));
    runtime rt(gpu ? runtime_options{} : cpu_only());
    session s(rt, g);
    auto restored = sv.restore(s, path);
    INFO(restored.to_string());
    REQUIRE(restored.ok());
    check_equal(s.run({}, {w.value}).value()[0], trained);
    REQUIRE(s.run({}, {}, {train}).ok()); // the slots came back too
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("values cross between two GPUs of a process device to device, not through the host",
          "[.gpu][transfer]") {
  // Two cards: the edge between them is a device-to-device copy. One card shown as two GPU
  // devices (visible_gpus {0, 0}): both read the same memory, so the value is used where it is.
  // Either way nothing goes through the host but the fetch of b.
  bool two_cards = discover_gpus().gpus.size() >= 2;
  runtime rt({.visible_gpus = two_cards ? std::vector<int>{0, 1} : std::vector<int>{0, 0}});
  REQUIRE(rt.gpus().size() == 2);
  graph g;
  auto x = placeholder(g, dtype::f32, {256, 256}, "x");
  output a, b;
  {
    auto d = g.device("/device:GPU:0");
    a = tanh(matmul(x, x), "on_gpu0");
  }
  {
    auto d = g.device("/device:GPU:1");
    b = relu(a, "on_gpu1");
  }
  auto xv = random_host(dtype::f32, {256, 256}, 50, -0.1, 0.1);
  session s(rt, g);
  session cpu(cpu_runtime(), g, {.allow_soft_placement = true});
  auto want = cpu.run({{x, xv}}, {b}).value()[0];
  for (int i = 0; i < 3; ++i) { // the second GPU's stream must see the first's finished value
    auto got = s.run({{x, xv}}, {b}).value()[0];
    check_close(got, want, 1e-5, 1e-6);
  }
  auto m0 = rt.gpu_transfers(0).value(), m1 = rt.gpu_transfers(1).value();
  int64_t bytes = 256 * 256 * 4;
  INFO("GPU 0: " << m0.host_to_device << " B in, " << m0.device_to_host << " B out, "
                 << m0.device_to_device << " B on device; GPU 1: " << m1.host_to_device
                 << " B in, " << m1.device_to_host << " B out, " << m1.device_to_device
                 << " B on device");
  CHECK(m0.host_to_device >= 3 * bytes); // x, fed each step
  CHECK(m0.device_to_host == 0);
  CHECK(m1.host_to_device == 0);
  CHECK(m1.device_to_host == 3 * bytes); // the fetches of b
  if (two_cards)
    CHECK(m1.device_to_device >= 3 * bytes);
}

TEST_CASE("RandomUniform on the GPU draws uniform numbers, the same sequence for the same seeds",
          "[.gpu][random]") {
  for (dtype t : {dtype::f32, dtype::f64}) {
    INFO(name(t));
    graph g;
    g.set_seed(11);
    auto u = random_uniform(g, {1000, 100}, t, 5, "u");
    auto draws = [&](int runs) {
      runtime rt;
      session s(rt, g);
      int randoms = 0; // the node is "u/RandomUniform": found by its op
      for (auto& [node, at] : placement_of(s, {}, {operation(u)}))
        if (at.first == "RandomUniform") {
          CHECK(on_gpu(at.second));
          ++randoms;
        }
      CHECK(randoms == 1);
      std::vector<std::vector<double>> out;
      for (int i = 0; i < runs; ++i) {
        auto r = s.run({}, {u});
        REQUIRE(r.ok());
        tensor v = r.value()[0];
        std::vector<double> d;
        for (int64_t k = 0; k < v.num_elements(); ++k)
          d.push_back(t == dtype::f32 ? double(v.data<float>()[k]) : v.data<double>()[k]);
        out.push_back(std::move(d));
      }
      return out;
    };
    auto a = draws(2), b = draws(2);
    CHECK(a == b);           // the same seeds: the same sequence in another runtime
    CHECK(a[0] != a[1]);     // each run draws anew
    double sum = 0, sq = 0, lo = 1, hi = 0;
    for (double v : a[0]) {
      sum += v;
      sq += v * v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    double n = double(a[0].size()), mean = sum / n, var = sq / n - mean * mean;
    CHECK(lo >= 0);
    CHECK(hi < 1);
    CHECK(std::abs(mean - 0.5) < 0.005);      // 100,000 draws: the mean's sd is 0.0009
    CHECK(std::abs(var - 1.0 / 12) < 0.002);
  }
}
