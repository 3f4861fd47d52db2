// What a runtime does about GPUs on any machine: discovery, soft placement, and the guard that
// keeps host code off device memory. (Kernels on a real GPU: tests/gpu/, tag [.gpu].)
#include <filesystem>
#include <map>
#include <set>

#include "runnel/actors/state/saver.hpp"
#include "runnel/bench/lstm_lm_graph.hpp"
#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/gpu/gpu_info.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

/// Host memory labelled as GPU:0's: what a GPU allocator's tensors look like to the host.
tensor fake_device_tensor(const tensor& host) {
  auto* keep = new tensor(host);
  return tensor::wrap(
      host.type(), host.shape(), host.raw_data(), [](void* p) { delete static_cast<tensor*>(p); },
      keep, memory_space::device, 0);
}

} // namespace

TEST_CASE("GPU discovery names the GPUs or says why there are none", "[actors][gpu_host]") {
  auto& found = discover_gpus();
  if (found.gpus.empty()) {
    CHECK_FALSE(found.why_none.empty());
    std::string error;
    std::vector<int> want{0};
    CHECK(visible_gpus(found, &want, &error).empty());
    CHECK_THAT(error, Catch::Contains("GPU 0") && Catch::Contains(found.why_none));
  } else {
    for (auto& g : found.gpus) {
      CHECK_FALSE(g.name.empty());
      CHECK(g.total_memory > 0);
    }
    std::vector<int> none;
    CHECK(visible_gpus(found, &none, nullptr).empty());
  }
  CHECK(visible_gpus(found, nullptr, nullptr).size() == found.gpus.size());
}

TEST_CASE("GPU requests run on the CPU under soft placement, else the error says why",
          "[actors][gpu_host]") {
  runtime rt;
  if (!rt.gpus().empty()) { // the runtime reports GPUs but places nothing there yet
    CHECK_FALSE(rt.no_gpu_reason().empty());
  }
  graph g;
  auto x = placeholder(g, dtype::f32, {2}, "x");
  output y;
  {
    auto d = g.device("/device:GPU:0");
    y = x * 2.0;
  }
  feed_list feeds{{x, tensor::vector<float>({1, 2})}};
  session strict(rt, g);
  auto r = strict.run(feeds, {y});
  REQUIRE_FALSE(r.ok());
  auto msg = r.error().to_string();
  CHECK_THAT(msg, Catch::Contains("cannot place node '"));
  CHECK_THAT(msg, Catch::Contains("/device:GPU:0") && Catch::Contains("device:cpu:0") &&
                      Catch::Contains("no GPU") && Catch::Contains(discover_gpus().why_none));
  session soft(rt, g, {.allow_soft_placement = true});
  check_equal(soft.run(feeds, {y}).value()[0], tensor::vector<float>({2, 4}));
}

TEST_CASE("host code refuses tensors in device memory instead of reading them", "[actors][gpu_host]") {
  auto dev = fake_device_tensor(tensor::vector<float>({1, 2, 3}));
  CHECK_FALSE(dev.host_readable());
  CHECK(dev.memory_name() == "GPU:0 memory");
  CHECK(dev.to_string() == "float32[3] <in GPU:0 memory>");
  CHECK_THROWS_WITH(dev.copy(), Catch::Contains("GPU:0 memory") && Catch::Contains("transfer"));
  CHECK_FALSE(equal(dev, dev));
  // A CPU kernel handed one fails its step with the node and the input named.
  runtime rt;
  graph g;
  auto x = placeholder(g, dtype::f32, {3}, "x");
  auto y = x + 1.0;
  session s(rt, g);
  auto r = s.run({{x, dev}}, {y});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().to_string(), Catch::Contains("input 0") && Catch::Contains("GPU:0 memory") &&
                                        Catch::Contains(y.node().name));
  // The runtime is fine afterwards.
  check_equal(s.run({{x, tensor::vector<float>({1, 2, 3})}}, {y}).value()[0],
              tensor::vector<float>({2, 3, 4}));
}

namespace {

/// Where each node ran in one traced step of `s`.
std::map<std::string, std::string> devices_of(session& s, const feed_list& feeds,
                                              const std::vector<output>& fetches,
                                              const std::vector<operation>& targets = {}) {
  run_metadata md;
  auto r = s.run(feeds, fetches, targets, {.trace = true}, &md);
  REQUIRE(r.ok());
  std::map<std::string, std::string> out;
  for (auto& n : md.nodes)
    out[n.node] = n.device;
  return out;
}

bool on_gpu(const std::string& device) {
  return device.find("device:gpu:0") != std::string::npos;
}

} // namespace

TEST_CASE("a simulated GPU gets the ops that have GPU kernels, and transfers bring values back",
          "[actors][gpu_host]") {
  runtime cpu_rt;
  runtime gpu_rt({.simulated_gpus = 1});
  auto names = gpu_rt.devices();
  REQUIRE(names.size() == 2);
  CHECK(names[1] == "/job:localhost/replica:0/task:0/device:gpu:0");
  CHECK(gpu_rt.no_gpu_reason().empty());
  graph g;
  auto x = placeholder(g, dtype::f32, {4, 3}, "x");
  auto w = constant(g, vals<float>({3, 2}, {1, -1, 2, 0.5f, -3, 1}));
  auto h = matmul(x, w, {}, "mm");
  auto y = relu(bias_add(h, constant(g, {0.5f, -0.25f})), "act");
  auto z = cast(greater(y, constant(g, 1.0f)), dtype::f32, "flag");
  auto total = reduce_prod(z, {1}, false, "total"); // Prod: no GPU kernel
  feed_list feeds{{x, vals<float>({4, 3}, {1, 2, 3, -1, 0, 2, 0.5f, 0.5f, 0.5f, 3, -2, 1})}};
  session on_cpu(cpu_rt, g), on_sim(gpu_rt, g);
  auto want = on_cpu.run(feeds, {y, z, h, total}).value();
  auto got = on_sim.run(feeds, {y, z, h, total}).value();
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i].host_readable()); // fetched values come back to the host
    check_equal(got[i], want[i]);
  }
  auto where = devices_of(on_sim, feeds, {y, z, total});
  CHECK(on_gpu(where.at("mm")));   // MatMul has a GPU kernel
  CHECK(on_gpu(where.at("act")));  // so has Relu
  CHECK(on_gpu(where.at("flag"))); // and Cast
  CHECK(on_gpu(where.at(g.at(y.node().inputs[0].node).name))); // BiasAdd has one too
  CHECK_FALSE(on_gpu(where.at("total")));                      // Prod has none
  CHECK(gpu_rt.gpu_memory(0).value().num_allocs > 0);
  CHECK_FALSE(gpu_rt.gpu_memory(1).ok());
}

TEST_CASE("training with compute on a simulated GPU matches the CPU", "[actors][gpu_host]") {
  auto train = [](runtime& rt) {
    graph g;
    g.set_seed(3);
    auto x = constant(g, vals<float>({4, 2}, {0, 0, 0, 1, 1, 0, 1, 1}));
    auto y = constant(g, vals<float>({4, 1}, {0, 1, 1, 0}));
    auto w1 = variable(g, truncated_normal(g, {2, 8}, 0.5), "gpu_w1");
    auto w2 = variable(g, truncated_normal(g, {8, 1}, 0.5), "gpu_w2");
    auto pred = sigmoid(matmul(tanh(matmul(x, w1)), w2));
    auto loss = mean(square(pred - y));
    gradient_descent_optimizer sgd(0.5);
    auto step = sgd.minimize(loss);
    session s(rt, g);
    REQUIRE(s.run({global_variables_initializer(g)}).ok());
    std::vector<float> losses;
    for (int i = 0; i < 30; ++i) {
      auto r = s.run({}, {loss}, {step});
      REQUIRE(r.ok());
      losses.push_back(r.value()[0].data<float>()[0]);
    }
    return losses;
  };
  runtime cpu_rt, gpu_rt({.simulated_gpus = 1});
  auto a = train(cpu_rt), b = train(gpu_rt);
  CHECK(b.back() < b.front());
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(b[i] == Approx(a[i]).epsilon(1e-5));
}

TEST_CASE("GPU memory running out fails the step with the node named, and the GPU stays usable",
          "[actors][gpu_host]") {
  runtime rt({.gpu_memory_limit = size_t(1) << 20, .simulated_gpus = 1});
  graph g;
  auto x = placeholder(g, dtype::f32, {-1}, "x");
  auto y = exp(x, "big_exp");
  session s(rt, g);
  auto r = s.run({{x, tensor(dtype::f32, shape{1 << 19})}}, {y}); // 2 MiB in, 2 MiB out
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::resource_exhausted);
  CHECK_THAT(r.error().to_string(), Catch::Contains("GPU:0") && Catch::Contains("1.0 MiB limit"));
  auto ok = s.run({{x, tensor::vector<float>({0, 1})}}, {y});
  REQUIRE(ok.ok());
  CHECK(ok.value()[0].data<float>()[0] == 1.f);
  // (What the step allocated is given back as its last references drop, which may be just
  // after run returns: no check of bytes_in_use here.)
  CHECK(rt.gpu_memory(0).value().peak_bytes_in_use <= (size_t(1) << 20));
}

TEST_CASE("a node pinned to the GPU without a GPU kernel is refused, naming it", "[actors][gpu_host]") {
  runtime rt({.simulated_gpus = 1});
  graph g;
  auto x = placeholder(g, dtype::f32, {2, 3}, "x");
  output b;
  {
    auto d = g.device("/device:GPU:0");
    b = reduce_prod(x, {1}, false, "pinned_prod");
  }
  session strict(rt, g);
  auto r = strict.run({{x, tensor(dtype::f32, shape{2, 3})}}, {b});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().to_string(),
             Catch::Contains("pinned_prod") && Catch::Contains("has no GPU kernel"));
  session soft(rt, g, {.allow_soft_placement = true});
  CHECK(soft.run({{x, tensor(dtype::f32, shape{2, 3})}}, {b}).ok());
}

TEST_CASE("the cost-model placer places with a GPU measured on first use", "[actors][gpu_host]") {
  runtime rt({.simulated_gpus = 1});
  graph g;
  auto x = placeholder(g, dtype::f32, {64, 64}, "x");
  auto y = tanh(matmul(x, x));
  session s(rt, g, {.placement = session_options::placement_policy::cost_model});
  tensor in(dtype::f32, shape{64, 64});
  for (auto& v : in.flat<float>())
    v = 0.01f;
  session reference(rt, g, {.placement = session_options::placement_policy::first_feasible});
  check_close(s.run({{x, in}}, {y}).value()[0], reference.run({{x, in}}, {y}).value()[0]);
}

TEST_CASE("a failing GPU kernel fails its step with the node named, and the next step runs",
          "[actors][gpu_host]") {
  runtime rt({.simulated_gpus = 1});
  graph g;
  auto a = placeholder(g, dtype::f32, {-1, -1}, "a");
  auto b = placeholder(g, dtype::f32, {-1, -1}, "b");
  auto c = matmul(a, b, {}, "gpu_mm");
  session s(rt, g);
  auto bad = s.run({{a, tensor(dtype::f32, shape{2, 3})}, {b, tensor(dtype::f32, shape{4, 5})}}, {c});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().to_string(), Catch::Contains("gpu_mm") && Catch::Contains("[2,3]"));
  auto good = s.run({{a, vals<float>({1, 2}, {1, 2})}, {b, vals<float>({2, 1}, {3, 4})}}, {c});
  REQUIRE(good.ok());
  CHECK(good.value()[0].data<float>()[0] == 11.f);
}

TEST_CASE("graphs with loops and conditionals stay on CPUs, saying so when a GPU is asked for",
          "[actors][gpu_host]") {
  runtime rt({.simulated_gpus = 1});
  graph g;
  auto x = placeholder(g, dtype::f32, {}, "x");
  output y;
  {
    auto d = g.device("/device:GPU:0");
    y = cond(less(x, constant(g, 0.f)), [&] { return -x; }, [&] { return x * 2.0; });
  }
  session strict(rt, g);
  auto r = strict.run({{x, tensor::scalar(3.f)}}, {y});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().to_string(), Catch::Contains("loops and conditionals run on CPUs only"));
  session soft(rt, g, {.allow_soft_placement = true});
  auto ok = soft.run({{x, tensor::scalar(3.f)}}, {y});
  REQUIRE(ok.ok());
  CHECK(ok.value()[0].data<float>()[0] == 6.f);
  CHECK(ok.value()[0].host_readable());
}

TEST_CASE("a saver leaves GPU variables and their updates on the GPU, and restores them there",
          "[actors][gpu_host]") {
  // The saver's restore placeholders once shared the variables' colocation group; a Placeholder
  // has no GPU kernel, so every variable and its ApplyAdam ran on the CPU, with the weights
  // crossing to the GPU each step.
  auto dir = std::filesystem::temp_directory_path() / "runnel_saver_gpu_placement";
  std::filesystem::remove_all(dir);
  graph g;
  auto x = constant(g, vals<float>({2, 2}, {1, 2, 3, 4}));
  auto w = variable(g, constant(g, vals<float>({2, 2}, {0.5f, -1, 2, 0.25f})), "sw");
  auto loss = sum(square(matmul(x, w.value)));
  adam_optimizer adam(0.01);
  auto train = adam.minimize(loss);
  saver sv(g);
  runtime rt({.simulated_gpus = 1});
  session s(rt, g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto where = devices_of(s, {}, {loss});
  CHECK(on_gpu(where.at("sw")));
  run_metadata md;
  REQUIRE(s.run({}, {}, {train}, {.trace = true}, &md).ok());
  int applies = 0;
  for (auto& n : md.nodes)
    if (n.op == "ApplyAdam") {
      CHECK(on_gpu(n.device));
      ++applies;
    }
  CHECK(applies == 1);
  auto trained = s.run({}, {w.value}).value()[0];
  auto path = sv.save(s, (dir / "model").string());
  REQUIRE(path.ok());
  REQUIRE(s.run({}, {}, {train}).ok());
  REQUIRE(sv.restore(s, path.value()).ok());
  check_equal(s.run({}, {w.value}).value()[0], trained);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the LSTM language model's training step runs on a simulated GPU",
          "[actors][gpu_host]") {
  // bench lstm_lm_step's model (gpu_bench times it on a real GPU), small: every op of a training
  // step that has a GPU kernel must be placed there, and the loss must fall as on the CPU. The
  // optimizer's rewrites are part of that (fused ops with GPU kernels), whatever the suite says.
  scoped_env optimizer("RUNNEL_GRAPH_OPTIMIZER", std::nullopt);
  auto train = [](runtime& rt, run_metadata* md) {
    bench::lstm_lm_graph m({.vocab = 50, .hidden = 8, .batch = 4, .time_steps = 5},
                           bench::lm_layers::blocks, "glm_");
    session s(rt, m.g);
    REQUIRE(s.run({global_variables_initializer(m.g)}).ok());
    std::vector<float> losses;
    for (int i = 0; i < 5; ++i) {
      auto r = s.run(m.feeds, {m.loss}, {m.train}, {.trace = md && i == 4}, md);
      REQUIRE(r.ok());
      losses.push_back(r.value()[0].data<float>()[0]);
    }
    return losses;
  };
  runtime cpu_rt, gpu_rt({.simulated_gpus = 1});
  run_metadata md;
  auto a = train(cpu_rt, nullptr), b = train(gpu_rt, &md);
  CHECK(b.back() < b.front());
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(b[i] == Approx(a[i]).epsilon(1e-4));
  // Only shape arithmetic (host integers), the step's final NoOp and the transfers that bring
  // their inputs stay on the CPU; the embedding's lookup and sparse update go with the table.
  const std::set<std::string> host_ops{"NoOp", "ReducedShape", "StridedSlice", "_Recv", "_Send"};
  std::string cpu_ops;
  bool saw_sparse_update = false;
  for (auto& n : md.nodes) {
    bool gpu = n.device.find("gpu:") != std::string::npos;
    if (!gpu && !host_ops.count(n.op))
      cpu_ops += n.op + " (" + n.node + ") ";
    saw_sparse_update |= gpu && n.op == "SparseApplyGradientDescent";
  }
  INFO("compute ops on the CPU: " << cpu_ops);
  CHECK(cpu_ops.empty());
  CHECK(saw_sparse_update);
}

TEST_CASE("a GPU's Adam updates run as one multi-tensor update, as the separate ones did",
          "[actors][gpu_host]") {
  // Three variables trained with Adam: on a (simulated) GPU the graph optimizer makes their
  // three ApplyAdam nodes one _MultiApplyAdam; the losses match the CPU's separate updates.
  scoped_env optimizer("RUNNEL_GRAPH_OPTIMIZER", std::nullopt);
  auto train = [](runtime& rt, run_metadata* md) {
    graph g;
    g.set_seed(5);
    auto x = constant(g, vals<float>({4, 3}, {0, 1, 2, 1, 0, 1, 2, 2, 0, 1, 1, 1}));
    auto y = constant(g, vals<float>({4, 1}, {1, 0, 1, 0}));
    auto w1 = variable(g, truncated_normal(g, {3, 5}, 0.5), "mt_w1");
    auto b1 = variable(g, zeros(g, dtype::f32, {5}), "mt_b1");
    auto w2 = variable(g, truncated_normal(g, {5, 1}, 0.5), "mt_w2");
    auto loss = mean(square(matmul(tanh(matmul(x, w1) + b1), w2) - y));
    auto step = adam_optimizer(0.05).minimize(loss);
    session s(rt, g);
    REQUIRE(s.run({global_variables_initializer(g)}).ok());
    std::vector<float> losses;
    for (int i = 0; i < 20; ++i) {
      auto r = s.run({}, {loss}, {step}, {.trace = md && i == 19}, md);
      REQUIRE(r.ok());
      losses.push_back(r.value()[0].data<float>()[0]);
    }
    return losses;
  };
  runtime cpu_rt, gpu_rt({.simulated_gpus = 1});
  run_metadata md, cpu_md;
  auto a = train(cpu_rt, &cpu_md), b = train(gpu_rt, &md);
  CHECK(b.back() < b.front() * 0.5f);
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(b[i] == Approx(a[i]).epsilon(1e-5));
  int multi = 0, single = 0;
  for (auto& n : md.nodes) {
    multi += n.op == "_MultiApplyAdam" && n.device.find("gpu:") != std::string::npos;
    single += n.op == "ApplyAdam";
  }
  CHECK(multi == 1);
  CHECK(single == 0);
  // On CPUs the updates stay apart (they run in parallel at their variables' actors).
  single = 0;
  for (auto& n : cpu_md.nodes)
    single += n.op == "ApplyAdam";
  CHECK(single == 3);
}

TEST_CASE("Adam updates that wait on one another are not made one multi-tensor update",
          "[actors][gpu_host]") {
  // The second variable's gradient is computed after the first variable's update: one
  // _MultiApplyAdam would wait on itself. They stay two ApplyAdam nodes, in that order.
  graph g;
  auto w1 = variable(g, constant(g, vals<float>({2}, {1, 2})), "wait_w1");
  auto w2 = variable(g, constant(g, vals<float>({2}, {3, 4})), "wait_w2");
  std::vector<graph_variable> slots;
  for (auto* name : {"wait_m1", "wait_v1", "wait_m2", "wait_v2"})
    slots.push_back(variable(g, zeros(g, dtype::f32, {2}), name));
  auto scalar = [&](float v) { return constant(g, v).ep(); };
  auto adam = [&](output var, output m, output v, output grad) {
    return g.build("ApplyAdam", "ApplyAdam",
                   {var.ep(), m.ep(), v.ep(), scalar(0.9f), scalar(0.999f), scalar(0.1f),
                    scalar(0.9f), scalar(0.999f), scalar(1e-8f), grad.ep()})[0];
  };
  auto first = adam(w1.ref, slots[0].ref, slots[1].ref, constant(g, vals<float>({2}, {1, 1})));
  output grad2;
  {
    auto after = g.control_dependencies({operation(first)});
    grad2 = w1.value * 2.f; // reads w1 as the first update left it
  }
  auto second = adam(w2.ref, slots[2].ref, slots[3].ref, grad2);
  runtime rt({.simulated_gpus = 1});
  session s(rt, g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  run_metadata md;
  auto both = group(g, {operation(first), operation(second)}); // the updates are no targets
  auto r = s.run({}, {}, {both}, {.trace = true}, &md);
  INFO((r.ok() ? std::string("ok") : r.error().to_string()));
  REQUIRE(r.ok());
  int single = 0, multi = 0;
  for (auto& n : md.nodes) {
    single += n.op == "ApplyAdam";
    multi += n.op == "_MultiApplyAdam";
  }
  CHECK(single == 2);
  CHECK(multi == 0);
}

TEST_CASE("Adam updating one variable twice in a step is not made one multi-tensor update",
          "[actors][gpu_host]") {
  // One update would lock the variable twice and wait on itself for ever: the two ApplyAdam
  // nodes stay apart and run one after the other, as on the CPU.
  graph g;
  auto w = variable(g, constant(g, vals<float>({2}, {1, 2})), "twice_w");
  auto loss = sum(square(w.value));
  adam_optimizer opt(0.1);
  auto grads = opt.compute_gradients(loss);
  REQUIRE(grads.size() == 1);
  auto step = opt.apply_gradients({grads[0], grads[0]});
  runtime rt({.simulated_gpus = 1});
  session s(rt, g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  run_metadata md;
  auto r = s.run({}, {w.value}, {step}, {.trace = true}, &md);
  INFO((r.ok() ? std::string("ok") : r.error().to_string()));
  REQUIRE(r.ok());
  int single = 0;
  for (auto& n : md.nodes)
    single += n.op == "ApplyAdam";
  CHECK(single == 2);
}
