// Cluster nodes inside one test process (several runtimes, real loopback connections): remote
// sessions, partitions across tasks, errors. tests/cluster/ runs real processes.
#include <algorithm>
#include <mutex>
#include <set>
#include <thread>

#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/net/endpoint.hpp"
#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/train/replica.hpp"
#include "runnel/ops/train/towers.hpp"
#include "runnel/tests/actors/cluster_nodes.hpp"
#include "runnel/tests/eval.hpp"
#include "runnel/tests/ports.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("a remote session runs a graph split over a ps and a worker", "[actors][cluster]") {
  auto spec = local_cluster({"ps=1", "worker=1"}, free_ports(2));
  auto ps = cluster_node::start(quiet(spec, "ps", 0)).value();
  auto worker = cluster_node::start(quiet(spec, "worker", 0)).value();

  // The model, with its variable on the ps and its compute on the worker, or without devices.
  struct model {
    graph g;
    output x, y, z, step;
    graph_variable w;
    explicit model(bool placed) {
      x = placeholder(g, dtype::f32, {2, 3}, "x");
      {
        auto d = g.device(placed ? "/job:ps/task:0" : "");
        w = variable(g, constant(g, tensor::from_values<float>(shape{3, 2}, {1, 2, 3, 4, 5, 6})), "w");
      }
      {
        auto d = g.device(placed ? "/job:worker/task:0" : "");
        y = matmul(x, w.value, {}, "y");
        z = tanh(y * 0.01, "z");
      }
      step = assign_add(w, constant(g, tensor::from_values<float>(shape{3, 2}, {1, 1, 1, 1, 1, 1})));
    }
  };
  auto xv = tensor::from_values<float>(shape{2, 3}, {1, 0, -1, 0.5f, 2, 3});
  model m(true);
  session remote(client_runtime(), m.g, "runnel://" + spec.address("worker", 0).value());
  REQUIRE(remote.run({global_variables_initializer(m.g)}).ok());
  auto r = remote.run({{m.x, xv}}, {m.y, m.z});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  // The same graph in a local session computes the same.
  model lm(false);
  runtime local_rt;
  session local(local_rt, lm.g);
  REQUIRE(local.run({global_variables_initializer(lm.g)}).ok());
  auto l = local.run({{lm.x, xv}}, {lm.y, lm.z}).value();
  check_equal(r.value()[0], l[0]);
  check_equal(r.value()[1], l[1]);
  // State lives on the ps, across runs and sessions.
  REQUIRE(remote.run({}, {m.step}).ok());
  session again(client_runtime(), m.g, "runnel://" + spec.address("ps", 0).value());
  auto after = again.run({}, {m.w.value}).value()[0];
  CHECK(after.data<float>()[0] == 2.f);
  CHECK(after.data<float>()[5] == 7.f);
  // The worker holds no copy: a session of its own runtime finds no such variable there.
  graph probe;
  auto pw = variable(probe, constant(probe, tensor::from_values<float>(shape{3, 2}, {0, 0, 0, 0, 0, 0})), "w");
  session on_worker(worker->rt(), probe);
  CHECK(on_worker.run({}, {pw.value}).error().code() == error_code::failed_precondition);
}

TEST_CASE("remote sessions report errors naming the node and task", "[actors][cluster]") {
  auto spec = local_cluster({"worker=2"}, free_ports(2));
  auto w0 = cluster_node::start(quiet(spec, "worker", 0)).value();
  auto w1 = cluster_node::start(quiet(spec, "worker", 1)).value();
  graph g;
  auto a = placeholder(g, dtype::f32, {-1, -1}, "a");
  auto b = placeholder(g, dtype::f32, {-1, -1}, "b");
  output y;
  {
    auto d = g.device("/job:worker/task:1");
    y = matmul(a, b, {}, "product");
  }
  session s(client_runtime(), g, "runnel://" + spec.address("worker", 0).value());
  auto bad = s.run({{a, tensor(dtype::f32, shape{2, 3})}, {b, tensor(dtype::f32, shape{4, 2})}}, {y});
  REQUIRE(!bad.ok());
  CHECK(bad.error().code() == error_code::invalid_argument);
  CHECK_THAT(bad.error().message(), Catch::Contains("node 'product'"));
  CHECK_THAT(bad.error().message(), Catch::Contains("/job:worker/replica:0/task:1"));
  // The session still works afterwards.
  auto good = s.run({{a, tensor(dtype::f32, shape{2, 3})}, {b, tensor(dtype::f32, shape{3, 2})}}, {y});
  REQUIRE(good.ok());
  CHECK(good.value()[0].shape() == shape{2, 2});
  // A feed of a tensor that is not a placeholder's prunes what computes it.
  auto doubled = y * 2.0;
  session s2(client_runtime(), g, "runnel://" + spec.address("worker", 1).value());
  auto fed = s2.run({{y, tensor::from_values<float>(shape{1, 1}, {21})}}, {doubled});
  REQUIRE(fed.ok());
  CHECK(fed.value()[0].data<float>()[0] == 42.f);
}

TEST_CASE("a session waits for missing tasks, then fails naming them", "[actors][cluster]") {
  auto spec = local_cluster({"ps=1", "worker=1"}, free_ports(2));
  auto o = quiet(spec, "worker", 0);
  o.startup_timeout = std::chrono::milliseconds(600);
  auto worker = cluster_node::start(o).value(); // the ps never starts
  graph g;
  auto c = constant(g, 1.f);
  session s(client_runtime(), g, "runnel://" + spec.address("worker", 0).value());
  auto t0 = std::chrono::steady_clock::now();
  auto r = s.run({}, {c});
  auto waited = std::chrono::steady_clock::now() - t0;
  REQUIRE(!r.ok());
  CHECK(r.error().code() == error_code::unavailable);
  CHECK_THAT(r.error().message(), Catch::Contains("/job:ps/replica:0/task:0"));
  CHECK_THAT(r.error().message(), Catch::Contains(spec.address("ps", 0).value()));
  CHECK(waited >= std::chrono::milliseconds(500));
}

TEST_CASE("the wrong auth token is refused, the right one accepted", "[actors][cluster]") {
  auto spec = local_cluster({"worker=1"}, free_ports(1));
  auto o = quiet(spec, "worker", 0);
  o.auth_token = "open sesame";
  auto worker = cluster_node::start(o).value();
  graph g;
  auto c = constant(g, 3.f) * 2.0;
  std::string target = "runnel://" + spec.address("worker", 0).value();
  session wrong(client_runtime(), g, target, {.auth_token = "guess"});
  auto r = wrong.run({}, {c});
  REQUIRE(!r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("auth token"));
  session right(client_runtime(), g, target, {.auth_token = "open sesame"});
  auto ok = right.run({}, {c});
  REQUIRE(ok.ok());
  CHECK(ok.value()[0].data<float>()[0] == 6.f);
  session bad_target(client_runtime(), g, "grpc://somewhere:1");
  CHECK(bad_target.run({}, {c}).error().code() == error_code::invalid_argument);
}

TEST_CASE("replica_device_setter puts variables on ps tasks and the rest on the worker",
          "[actors][cluster]") {
  graph g;
  output x, y;
  std::vector<graph_variable> vars;
  {
    auto d = g.device(replica_device_setter(2, "/job:worker/task:1"));
    x = placeholder(g, dtype::f32, {4, 8}, "x");
    for (int i = 0; i < 3; ++i)
      vars.push_back(variable(g, zeros(g, dtype::f32, {8, 8}), "v" + std::to_string(i)));
    y = matmul(matmul(x, vars[0].value), vars[1].value);
    auto explicit_d = g.device("/job:worker/task:0");
    (void)explicit_d;
  }
  CHECK(vars[0].ref.node().device == "/job:ps/task:0");
  CHECK(vars[1].ref.node().device == "/job:ps/task:1");
  CHECK(vars[2].ref.node().device == "/job:ps/task:0");
  CHECK(y.node().device == "/job:worker/task:1");
  CHECK(x.node().device == "/job:worker/task:1");
  // Reads and assignments follow their variable, not the device function.
  CHECK(vars[1].value.node().colocation == std::vector<std::string>{"v1"});
  // Greedy by size: a big variable first, then the small ones fill the other task.
  graph h;
  std::vector<graph_variable> hv;
  {
    auto d = h.device(replica_device_setter(2, "/job:worker", ps_strategy::greedy_by_size));
    hv.push_back(variable(h, zeros(h, dtype::f32, {1000, 100}), "big"));
    hv.push_back(variable(h, zeros(h, dtype::f32, {10}), "small1"));
    hv.push_back(variable(h, zeros(h, dtype::f32, {10}), "small2"));
  }
  CHECK(hv[0].ref.node().device == "/job:ps/task:0");
  CHECK(hv[1].ref.node().device == "/job:ps/task:1");
  CHECK(hv[2].ref.node().device == "/job:ps/task:1");
}

TEST_CASE("a while loop on a worker trains variables on a ps, as in one process",
          "[actors][cluster][control_flow]") {
  auto spec = local_cluster({"ps=1", "worker=1"}, free_ports(2));
  auto ps = cluster_node::start(quiet(spec, "ps", 0)).value();
  auto worker = cluster_node::start(quiet(spec, "worker", 0)).value();
  struct model {
    graph g;
    output x, loss;
    operation train, init;
    explicit model(bool placed) {
      using vars = std::vector<output>;
      x = placeholder(g, dtype::f32, shape{-1}, "x");
      graph_variable w, b;
      {
        auto d = g.device(placed ? "/job:ps/task:0" : "");
        w = variable(g, constant(g, 0.5f), "w");
        b = variable(g, constant(g, 0.0f), "b");
      }
      auto d = g.device(placed ? "/job:worker/task:0" : "");
      auto out = while_loop([&](const vars& v) { return less(v[0], constant(g, int32_t(4))); },
                            [&](const vars& v) {
                              return vars{v[0] + constant(g, int32_t(1)),
                                          tanh(v[1] * w.value + b.value)};
                            },
                            {constant(g, int32_t(0)), x});
      loss = mean(square(out[1] - x * 0.5f));
      gradient_descent_optimizer opt(1.0);
      train = opt.minimize(loss);
      init = global_variables_initializer(g);
    }
  };
  auto xv = tensor::vector<float>({-0.8f, -0.3f, 0.2f, 0.6f, 0.9f});
  model m(true), lm(false);
  session remote(client_runtime(), m.g, "runnel://" + spec.address("worker", 0).value());
  runtime local_rt;
  session local(local_rt, lm.g);
  REQUIRE(remote.run({m.init}).ok());
  REQUIRE(local.run({lm.init}).ok());
  for (int i = 0; i < 20; ++i) {
    auto r = remote.run({{m.x, xv}}, {}, {m.train});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    REQUIRE(local.run({{lm.x, xv}}, {}, {lm.train}).ok());
  }
  auto rl = remote.run({{m.x, xv}}, {m.loss}).value()[0];
  auto ll = local.run({{lm.x, xv}}, {lm.loss}).value()[0];
  check_close(rl, ll, 1e-5, 1e-7);
  CHECK(*rl.data<float>() < 0.05f);
}

TEST_CASE("while loops and conds whose bodies span tasks run as in one process",
          "[actors][cluster][control_flow]") {
  auto spec = local_cluster({"ps=1", "worker=1"}, free_ports(2));
  auto ps = cluster_node::start(quiet(spec, "ps", 0)).value();
  auto worker = cluster_node::start(quiet(spec, "worker", 0)).value();
  using vars = std::vector<output>;
  // Loop bodies and branches with ops on both tasks: every iteration's values cross twice, the
  // loop's predicate goes to the ps each iteration, dead values cross at the loop's end.
  struct model {
    graph g;
    output x, p, y, z, nested, grad;
    explicit model(bool placed) {
      auto on = [&](const char* task) { return g.device(placed ? task : ""); };
      auto d = on("/job:worker/task:0");
      x = placeholder(g, dtype::f64, shape{3}, "x");
      p = placeholder(g, dtype::boolean, shape{}, "p");
      auto r = while_loop([&](const vars& v) { return less(v[0], constant(g, int32_t(5))); },
                          [&](const vars& v) {
                            output h;
                            {
                              auto ps_side = on("/job:ps/task:0");
                              h = tanh(v[1] * 0.9 + 0.1);
                            }
                            return vars{v[0] + constant(g, int32_t(1)), h * 1.1};
                          },
                          {constant(g, int32_t(0)), x});
      y = r[1];
      grad = gradients({sum(square(y))}, {x})[0];
      z = cond(p,
               [&] {
                 auto ps_side = on("/job:ps/task:0");
                 return x * 2.0;
               },
               [&] { return x + 1.0; });
      // An inner loop on the ps inside an outer loop on the worker.
      nested = while_loop([&](const vars& v) { return less(v[0], constant(g, int32_t(3))); },
                          [&](const vars& v) {
                            auto ps_side = on("/job:ps/task:0");
                            auto inner = while_loop(
                                [&](const vars& u) { return less(u[0], constant(g, int32_t(2))); },
                                [&](const vars& u) {
                                  return vars{u[0] + constant(g, int32_t(1)), u[1] * 1.5};
                                },
                                {constant(g, int32_t(0)), v[1]});
                            auto back = on("/job:worker/task:0");
                            return vars{v[0] + constant(g, int32_t(1)), inner[1] + 1.0};
                          },
                          {constant(g, int32_t(0)), x})[1];
    }
  };
  model m(true), lm(false);
  session remote(client_runtime(), m.g, "runnel://" + spec.address("worker", 0).value());
  runtime local_rt;
  session local(local_rt, lm.g);
  auto xv = tensor::vector<double>({0.5, -0.25, 1.0});
  for (bool taken : {true, false}) {
    auto r = remote.run({{m.x, xv}, {m.p, tensor::scalar(taken)}}, {m.y, m.grad, m.z, m.nested});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    auto l = local.run({{lm.x, xv}, {lm.p, tensor::scalar(taken)}},
                       {lm.y, lm.grad, lm.z, lm.nested}).value();
    for (size_t k = 0; k < l.size(); ++k) {
      INFO("fetch " << k);
      check_close(r.value()[k], l[k], 1e-12, 1e-12);
    }
  }
}

TEST_CASE("a sparse update of a table on a ps sends only the rows looked up",
          "[actors][cluster]") {
  auto spec = local_cluster({"ps=1", "worker=1"}, free_ports(2));
  auto ps = cluster_node::start(quiet(spec, "ps", 0)).value();
  auto worker = cluster_node::start(quiet(spec, "worker", 0)).value();
  const int64_t rows = 100'000, dim = 64, touched = 100;
  graph g;
  graph_variable table;
  {
    auto d = g.device("/job:ps/task:0");
    table = variable(g, zeros(g, dtype::f32, {rows, dim}), "sparse_ps_table");
  }
  auto d = g.device("/job:worker/task:0");
  auto ids = placeholder(g, dtype::i32, shape{touched}, "ids");
  auto loss = sum(embedding_lookup(table.value, ids));
  auto train = gradient_descent_optimizer(1.0).minimize(loss);
  auto probe = embedding_lookup(table.value, constant(g, {int32_t(7), int32_t(8)}), {.name = "probe"});
  session s(client_runtime(), g, "runnel://" + spec.address("worker", 0).value());
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  std::vector<int32_t> batch{7}; // id 7 once, 8 never
  for (int32_t i = 1; i < touched; ++i)
    batch.push_back(i * 997 + 10);
  feed_list feeds{{ids, tensor::vector<int32_t>(batch)}};
  REQUIRE(s.run(feeds, {}, {train}).ok()); // warm-up: graphs registered
  uint64_t before = ps->bytes_sent() + ps->bytes_received();
  auto r = s.run(feeds, {}, {train});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  uint64_t moved = ps->bytes_sent() + ps->bytes_received() - before;
  uint64_t row_bytes = uint64_t(touched * dim * 4);
  INFO("bytes through the ps in one step: " << moved << "; the rows: " << row_bytes
                                            << " each way; the table: " << rows * dim * 4);
  CHECK(moved >= 2 * row_bytes);     // the rows out and their gradient back
  CHECK(moved < 3 * row_bytes + 20'000); // and little more: never the table
  auto v = s.run({}, {probe}).value()[0];
  CHECK(v.flat<float>()[0] == -2.0f); // id 7 looked up once per step, two steps
  CHECK(v.flat<float>()[size_t(dim)] == 0.0f);
}

TEST_CASE("towers on two worker tasks with the variables on a ps train as one model",
          "[actors][cluster]") {
  auto spec = local_cluster({"ps=1", "worker=2"}, free_ports(3));
  auto ps = cluster_node::start(quiet(spec, "ps", 0)).value();
  auto w0 = cluster_node::start(quiet(spec, "worker", 0)).value();
  auto w1 = cluster_node::start(quiet(spec, "worker", 1)).value();
  auto x_all = tensor::from_values<float>({4, 2}, {1, 2, -1, 0.5f, 2, -1, 0, 1});
  auto y_all = tensor::from_values<float>({4, 1}, {1, 0, 2, -1});
  auto model = [&](graph& g, bool towered, const std::string& name) {
    graph_variable w;
    {
      auto d = g.device(towered ? "/job:ps/task:0" : "");
      w = variable(g, constant(g, tensor::from_values<float>({2, 1}, {0.25f, -0.5f})), name);
    }
    auto x = placeholder(g, dtype::f32, shape{4, 2}, "x");
    auto y = placeholder(g, dtype::f32, shape{4, 1}, "y");
    gradient_descent_optimizer sgd(0.2);
    operation train;
    if (towered) {
      auto t = build_towers(g, {"/job:worker/task:0", "/job:worker/task:1"}, [&](int i) {
        return mean(square(sub(matmul(slice(x, {2 * i, 0}, {2, 2}), w),
                               slice(y, {2 * i, 0}, {2, 1}))));
      }, sgd);
      train = sgd.apply_gradients(t.grads_and_vars);
    } else {
      train = sgd.minimize(mean(square(sub(matmul(x, w), y))));
    }
    return std::make_tuple(w, x, y, train);
  };
  graph gt, gl;
  auto [wt, xt, yt, train_t] = model(gt, true, "towers_cluster_w");
  auto [wl, xl, yl, train_l] = model(gl, false, "towers_cluster_ref_w");
  session st(client_runtime(), gt, "runnel://" + spec.address("worker", 0).value());
  session sl(client_runtime(), gl);
  REQUIRE(st.run({global_variables_initializer(gt)}).ok());
  REQUIRE(sl.run({global_variables_initializer(gl)}).ok());
  uint64_t w1_before = w1->bytes_sent();
  for (int k = 0; k < 4; ++k) {
    auto r = st.run({{xt, x_all}, {yt, y_all}}, {}, {train_t});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    REQUIRE(sl.run({{xl, x_all}, {yl, y_all}}, {}, {train_l}).ok());
  }
  CHECK(w1->bytes_sent() > w1_before); // worker 1 computed its tower's gradient
  check_close(st.run({}, {wt.value}).value()[0], sl.run({}, {wl.value}).value()[0], 1e-5, 1e-6);
}

TEST_CASE("an edge marked send_as_bf16 crosses tasks as bfloat16 and only that edge",
          "[actors][cluster]") {
  auto spec = local_cluster({"ps=1", "worker=1"}, free_ports(2));
  auto ps = cluster_node::start(quiet(spec, "ps", 0)).value();
  auto worker = cluster_node::start(quiet(spec, "worker", 0)).value();
  const int64_t n = 1 << 16;
  graph g;
  output narrow, wide;
  {
    auto d = g.device("/job:worker/task:0");
    // 1 + 2^-10 needs mantissa bits that bfloat16 drops (it keeps 7).
    auto x = filled(g, dtype::f32, shape{n}, 1.0 + 1.0 / 1024, "x");
    auto x2 = filled(g, dtype::f32, shape{n}, 1.0 + 1.0 / 1024, "x2");
    send_as_bf16(x);
    auto d2 = g.device("/job:ps/task:0");
    narrow = sum(x, std::vector<int64_t>{}, false, "narrow");
    wide = sum(x2, std::vector<int64_t>{}, false, "wide");
  }
  session s(client_runtime(), g, "runnel://" + spec.address("worker", 0).value());
  REQUIRE(s.run({}, {narrow, wide}).ok()); // registered
  uint64_t before = worker->bytes_sent();
  auto r = s.run({}, {narrow}).value();
  uint64_t narrow_bytes = worker->bytes_sent() - before;
  before = worker->bytes_sent();
  auto w = s.run({}, {wide}).value();
  uint64_t wide_bytes = worker->bytes_sent() - before;
  CHECK(r[0].data<float>()[0] == float(n));                   // truncated to 1.0 each
  CHECK(w[0].data<float>()[0] == Approx(double(n) * (1.0 + 1.0 / 1024)));
  CHECK(narrow_bytes < uint64_t(n) * 2 + 1024);
  CHECK(wide_bytes >= uint64_t(n) * 4);
}

TEST_CASE("a worker's GPU takes its part of a remote step, with transfers both ways",
          "[actors][cluster][gpu_host]") {
  auto spec = local_cluster({"ps=1", "worker=1"}, free_ports(2));
  auto ps = cluster_node::start(quiet(spec, "ps", 0)).value();
  auto wo = quiet(spec, "worker", 0);
  wo.simulated_gpus = 1;
  auto worker = cluster_node::start(std::move(wo)).value();
  auto build = [](graph& g, bool placed, output& x, output& y, output& z) {
    x = placeholder(g, dtype::f32, {2, 3}, "x");
    graph_variable w;
    {
      auto d = g.device(placed ? "/job:ps/task:0" : "");
      w = variable(g, constant(g, tensor::from_values<float>(shape{3, 2}, {1, 2, 3, 4, 5, 6})),
                   "gpu_cluster_w");
    }
    {
      auto d = g.device(placed ? "/job:worker/task:0/device:GPU:0" : "");
      y = matmul(x, w.value, {}, "y"); // the ps's variable arrives at the worker's GPU
    }
    {
      auto d = g.device(placed ? "/job:worker/task:0/device:CPU:0" : "");
      z = sum(y, {1}, false, "z"); // and the GPU's result goes to the worker's CPU
    }
  };
  auto xv = tensor::from_values<float>(shape{2, 3}, {1, 0, -1, 0.5f, 2, 3});
  graph g;
  output x, y, z;
  build(g, true, x, y, z);
  session remote(client_runtime(), g, "runnel://" + spec.address("worker", 0).value());
  REQUIRE(remote.run({global_variables_initializer(g)}).ok());
  auto r = remote.run({{x, xv}}, {y, z});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  graph lg;
  output lx, ly, lz;
  build(lg, false, lx, ly, lz);
  runtime local_rt;
  session local(local_rt, lg);
  REQUIRE(local.run({global_variables_initializer(lg)}).ok());
  auto l = local.run({{lx, xv}}, {ly, lz}).value();
  check_equal(r.value()[0], l[0]);
  check_equal(r.value()[1], l[1]);
  CHECK(worker->rt().gpu_memory(0).value().num_allocs > 0); // it did run on the GPU
}

TEST_CASE("a session in a node's own process calls its master directly, until the node stops",
          "[actors][cluster]") {
  auto spec = local_cluster({"worker=1"}, free_ports(1));
  auto node = cluster_node::start(quiet(spec, "worker", 0)).value();
  graph g;
  auto x = placeholder(g, dtype::f32, {}, "x");
  auto y = x + 1.0;
  std::string target = "runnel://" + spec.address("worker", 0).value();
  session direct(client_runtime(), g, target);
  REQUIRE(direct.run({{x, tensor::scalar<float>(1)}}, {y}).ok());
  // Nothing crossed the node's endpoint: no connection.
  CHECK(node->connections_accepted() == 0);
  session networked(client_runtime(), g, target, session_options{.in_process_master = false});
  auto r = networked.run({{x, tensor::scalar<float>(2)}}, {y});
  REQUIRE(r.ok());
  CHECK(r.value()[0].data<float>()[0] == 3.f);
  CHECK(node->connections_accepted() > 0);
  // Other credentials go over the network and are refused there, as from another process.
  session wrong(client_runtime(), g, target, session_options{.auth_token = "not the token"});
  CHECK(!wrong.run({{x, tensor::scalar<float>(1)}}, {y}).ok());
  // A stopped node fails the direct session's next run, naming the address; nothing hangs.
  node.reset();
  auto after = direct.run({{x, tensor::scalar<float>(1)}}, {y});
  REQUIRE(!after.ok());
  CHECK(after.error().code() == error_code::unavailable);
  CHECK(after.error().message().find(spec.address("worker", 0).value()) != std::string::npos);
}

TEST_CASE("a client master of its own places the graph and calls the tasks' workers directly",
          "[actors][cluster]") {
  auto spec = local_cluster({"ps=1", "worker=1"}, free_ports(2));
  // What the nodes' masters log: a session they create says so.
  auto lines = std::make_shared<std::pair<std::mutex, std::vector<std::string>>>();
  auto logged = [lines, &spec](std::string job) {
    node_options o = quiet(spec, job, 0);
    o.log = [lines](const std::string&, const std::string& message) {
      std::lock_guard lock(lines->first);
      lines->second.push_back(message);
    };
    return o;
  };
  auto ps = cluster_node::start(logged("ps")).value();
  auto worker = cluster_node::start(logged("worker")).value();
  auto sessions_created = [lines] {
    std::lock_guard lock(lines->first);
    return std::count_if(lines->second.begin(), lines->second.end(), [](const std::string& l) {
      return l.find(" created: ") != std::string::npos;
    });
  };
  graph g;
  auto x = placeholder(g, dtype::f32, {2}, "x");
  graph_variable w;
  {
    auto d = g.device("/job:ps/task:0");
    w = variable(g, constant(g, tensor::from_values<float>(shape{2}, {1, 2})), "w");
  }
  output y;
  {
    auto d = g.device("/job:worker/task:0");
    y = x * w.value + 1.0;
  }
  auto bump = assign_add(w, constant(g, tensor::from_values<float>(shape{2}, {1, 1})));
  std::string target = "runnel://" + spec.address("worker", 0).value();
  session own(client_runtime(), g, target,
              session_options{.in_process_master = false, .client_master = true});
  REQUIRE(own.run({global_variables_initializer(g)}).ok());
  auto r = own.run({{x, tensor::from_values<float>(shape{2}, {3, 4})}}, {y});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  CHECK(r.value()[0].data<float>()[0] == 4.f);
  CHECK(r.value()[0].data<float>()[1] == 9.f);
  REQUIRE(own.run({}, {}, {bump}).ok());
  run_metadata md;
  auto traced = own.run({{x, tensor::from_values<float>(shape{2}, {1, 1})}}, {y}, {},
                        run_options{.trace = true}, &md);
  REQUIRE(traced.ok());
  CHECK(traced.value()[0].data<float>()[1] == 4.f); // the ps's state, updated by the bump
  CHECK(!md.nodes.empty());
  // Neither node's master made a session: this process placed and drove the steps.
  CHECK(sessions_created() == 0);
  // The same through the worker node's master, for contrast: it logs its session.
  session via_node(client_runtime(), g, target, session_options{.in_process_master = false});
  REQUIRE(via_node.run({{x, tensor::from_values<float>(shape{2}, {1, 1})}}, {y}).ok());
  CHECK(sessions_created() == 1);
  // A target that is not a node: the first run fails naming it, and nothing hangs.
  session nowhere(client_runtime(), g, "runnel://127.0.0.1:" + std::to_string(free_ports(1)[0]),
                  session_options{.remote_timeout = std::chrono::milliseconds(5000),
                                  .in_process_master = false,
                                  .client_master = true});
  auto failed = nowhere.run({{x, tensor::from_values<float>(shape{2}, {1, 1})}}, {y});
  REQUIRE(!failed.ok());
  CHECK(failed.error().message().find("cluster spec") != std::string::npos);
}
