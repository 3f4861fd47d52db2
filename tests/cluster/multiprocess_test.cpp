// Real runnel-node processes on 127.0.0.1: remote sessions against local ones, a task killed
// mid-training and brought back, garbage at a node's port, clean shutdown.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runnel/actors/state/saver.hpp"
#include "runnel/net/endpoint.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/train/sync_replicas.hpp"
#include "runnel/tests/eval.hpp"
#include "runnel/tests/cluster/node_process.hpp"
#include "runnel/tests/ports.hpp"

using namespace runnel;
using namespace runnel::testing;
namespace fs = std::filesystem;

namespace {



/// A linear regression: w on the ps, the loss and gradients on the worker.
struct regression {
  graph g;
  output x, y, loss, w_value;
  operation train, init;
  graph_variable w, b;
  explicit regression(bool placed) {
    x = placeholder(g, dtype::f32, {-1, 3}, "x");
    y = placeholder(g, dtype::f32, {-1, 1}, "y");
    {
      auto d = g.device(placed ? "/job:ps/task:0" : "");
      w = variable(g, zeros(g, dtype::f32, {3, 1}), "w");
      b = variable(g, zeros(g, dtype::f32, {1}), "b");
    }
    {
      auto d = g.device(placed ? "/job:worker/task:0" : "");
      auto pred = matmul(x, w.value) + b.value;
      loss = mean(square(pred - y));
      train = gradient_descent_optimizer(0.1).minimize(loss);
    }
    init = global_variables_initializer(g);
    w_value = w.value;
  }
};

/// A fixed batch of y = x . [1, -2, 0.5] + 0.25.
std::pair<tensor, tensor> batch() {
  tensor x(dtype::f32, shape{16, 3}), y(dtype::f32, shape{16, 1});
  for (int i = 0; i < 16; ++i) {
    float a = float(i % 4) - 1.5f, b = float(i / 4) - 1.5f, c = float((i * 7) % 5) - 2;
    x.data<float>()[i * 3] = a;
    x.data<float>()[i * 3 + 1] = b;
    x.data<float>()[i * 3 + 2] = c;
    y.data<float>()[i] = a - 2 * b + 0.5f * c + 0.25f;
  }
  return {x, y};
}

} // namespace

TEST_CASE("training across ps and worker processes matches a local session", "[multiprocess]") {
  auto dir = scratch("match");
  auto ports = free_ports(2);
  std::string ps_addr = "127.0.0.1:" + std::to_string(ports[0]);
  std::string worker_addr = "127.0.0.1:" + std::to_string(ports[1]);
  std::string cluster = "ps=" + ps_addr + ";worker=" + worker_addr;
  node_process ps(cluster, "ps", 0, dir), worker(cluster, "worker", 0, dir);
  REQUIRE(ps.wait_ready());
  REQUIRE(worker.wait_ready());

  auto [xv, yv] = batch();
  regression remote_model(true), local_model(false);
  session remote(client_runtime(), remote_model.g, "runnel://" + worker_addr);
  runtime local_rt;
  session local(local_rt, local_model.g);
  auto init = remote.run({remote_model.init});
  INFO(init.to_string() << "\nps log:\n" << ps.log() << "\nworker log:\n" << worker.log());
  REQUIRE(init.ok());
  REQUIRE(local.run({local_model.init}).ok());
  for (int step = 0; step < 30; ++step) {
    auto r = remote.run({{remote_model.x, xv}, {remote_model.y, yv}}, {remote_model.loss},
                        {remote_model.train});
    INFO(r.error().to_string() << "\nps log:\n" << ps.log() << "\nworker log:\n" << worker.log());
    REQUIRE(r.ok());
    auto l = local.run({{local_model.x, xv}, {local_model.y, yv}}, {local_model.loss},
                       {local_model.train});
    REQUIRE(l.ok());
    CHECK(r.value()[0].data<float>()[0] == Approx(l.value()[0].data<float>()[0]).epsilon(1e-5));
  }
  check_equal(remote.run({}, {remote_model.w_value}).value()[0],
              local.run({}, {local_model.w_value}).value()[0]);
  // SIGTERM stops a node cleanly.
  ps.kill(SIGTERM);
  CHECK(ps.wait_exit(std::chrono::seconds(20)) == 0);
  CHECK_THAT(ps.log(), Catch::Contains("stopped"));
}

TEST_CASE("a ps killed mid-training fails the step naming it, and training resumes from the "
          "checkpoint when it is back",
          "[multiprocess]") {
  auto dir = scratch("kill");
  auto ports = free_ports(2);
  std::string ps_addr = "127.0.0.1:" + std::to_string(ports[0]);
  std::string worker_addr = "127.0.0.1:" + std::to_string(ports[1]);
  std::string cluster = "ps=" + ps_addr + ";worker=" + worker_addr;
  auto ps = std::make_unique<node_process>(cluster, "ps", 0, dir);
  node_process worker(cluster, "worker", 0, dir);
  REQUIRE(ps->wait_ready());
  REQUIRE(worker.wait_ready());

  auto [xv, yv] = batch();
  regression m(true);
  saver sv(m.g);
  session s(client_runtime(), m.g, "runnel://" + worker_addr);
  REQUIRE(s.run({m.init}).ok());
  feed_list feeds{{m.x, xv}, {m.y, yv}};
  float saved_loss = 0;
  for (int step = 1; step <= 20; ++step) {
    auto r = s.run(feeds, {m.loss}, {m.train});
    REQUIRE(r.ok());
    if (step == 10) {
      REQUIRE(sv.save(s, (dir / "ckpt" / "model").string(), step).ok());
      saved_loss = s.run(feeds, {m.loss}).value()[0].data<float>()[0];
    }
  }
  // Kill the ps while steps run.
  std::atomic<bool> stop{false};
  status failure;
  auto t_kill = std::chrono::steady_clock::now();
  std::thread trainer([&] {
    while (!stop) {
      auto r = s.run(feeds, {m.loss}, {m.train});
      if (!r.ok()) {
        failure = r.error();
        return;
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  t_kill = std::chrono::steady_clock::now();
  ps->kill(SIGKILL);
  trainer.join();
  auto detected = std::chrono::steady_clock::now() - t_kill;
  INFO(failure.to_string());
  CHECK(failure.code() == error_code::unavailable);
  CHECK_THAT(failure.message(), Catch::Contains("/job:ps/replica:0/task:0"));
  CHECK(detected < std::chrono::seconds(10));
  // While it is down, runs fail fast with the same kind of error.
  auto down = s.run(feeds, {m.loss}, {m.train});
  CHECK(!down.ok());
  // Bring it back: a new process (a new incarnation), its variables uninitialised.
  ps.reset();
  node_process ps2(cluster, "ps", 0, dir);
  REQUIRE(ps2.wait_ready());
  auto latest = saver::latest_checkpoint((dir / "ckpt").string());
  REQUIRE(latest.ok());
  status restored;
  for (int attempt = 0; attempt < 50; ++attempt) { // the first run may still see the old ps
    restored = sv.restore(s, *latest);
    if (restored.ok())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(restored.to_string());
  REQUIRE(restored.ok());
  auto after = s.run(feeds, {m.loss}).value()[0].data<float>()[0];
  CHECK(after == Approx(saved_loss).epsilon(1e-5));
  for (int step = 0; step < 5; ++step) {
    auto r = s.run(feeds, {m.loss}, {m.train});
    bool alive = r.ok() || ps2.running();
    INFO(r.error().to_string() << "\nps alive: " << alive << "\nps log:\n" << ps2.log()
                               << "\nworker log:\n" << worker.log());
    REQUIRE(r.ok());
  }
  CHECK(s.run(feeds, {m.loss}).value()[0].data<float>()[0] < after);
}

TEST_CASE("a ps stopped with SIGSTOP fails the step naming it within the heartbeat timeout, and "
          "training goes on after SIGCONT",
          "[multiprocess]") {
  auto dir = scratch("stop");
  auto ports = free_ports(2);
  std::string ps_addr = "127.0.0.1:" + std::to_string(ports[0]);
  std::string worker_addr = "127.0.0.1:" + std::to_string(ports[1]);
  std::string cluster = "ps=" + ps_addr + ";worker=" + worker_addr;
  node_process ps(cluster, "ps", 0, dir);
  node_process worker(cluster, "worker", 0, dir, {"--heartbeat-timeout", "1"});
  REQUIRE(ps.wait_ready());
  REQUIRE(worker.wait_ready());
  auto [xv, yv] = batch();
  regression m(true);
  session s(client_runtime(), m.g, "runnel://" + worker_addr);
  REQUIRE(s.run({m.init}).ok());
  feed_list feeds{{m.x, xv}, {m.y, yv}};
  REQUIRE(s.run(feeds, {m.loss}, {m.train}).ok());
  // The ps's connections stay open, so only the heartbeats can tell.
  ps.stop();
  auto t0 = std::chrono::steady_clock::now();
  auto r = s.run(feeds, {m.loss}, {m.train});
  auto took = std::chrono::steady_clock::now() - t0;
  ps.kill(SIGCONT);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().to_string());
  CHECK(r.error().code() == error_code::unavailable);
  CHECK_THAT(r.error().message(), Catch::Contains("/job:ps/replica:0/task:0") &&
                                      Catch::Contains("heartbeat"));
  CHECK(took < std::chrono::seconds(5));
  // Back from the stop: the next steps run.
  for (int step = 0; step < 3; ++step) {
    auto again = s.run(feeds, {m.loss}, {m.train});
    INFO(again.error().to_string() << "\nps log:\n" << ps.log() << "\nworker log:\n"
                                   << worker.log());
    REQUIRE(again.ok());
  }
}

TEST_CASE("sync replicas on two worker processes train exactly as one process averaging their "
          "gradients",
          "[multiprocess]") {
  auto dir = scratch("sync");
  auto ports = free_ports(3);
  std::string cluster = "ps=127.0.0.1:" + std::to_string(ports[0]) + ";worker=127.0.0.1:" +
                        std::to_string(ports[1]) + ",127.0.0.1:" + std::to_string(ports[2]);
  node_process ps(cluster, "ps", 0, dir), w0(cluster, "worker", 0, dir), w1(cluster, "worker", 1, dir);
  REQUIRE(ps.wait_ready());
  REQUIRE(w0.wait_ready());
  REQUIRE(w1.wait_ready());
  // Replica r trains on half r of the fixed batch (8 of its 16 rows) at every step.
  auto [xv, yv] = batch();
  auto part = [&, xv = xv, yv = yv](int r, int) {
    return std::pair{xv.slice(8 * r, 8 * r + 8), yv.slice(8 * r, 8 * r + 8)};
  };
  struct replica {
    graph g;
    output x, y;
    graph_variable w;
    std::unique_ptr<gradient_descent_optimizer> sgd;
    std::unique_ptr<sync_replicas_optimizer> opt;
    operation train, init;
    replica(int r) {
      graph_variable step;
      {
        auto d = g.device("/job:ps/task:0");
        w = variable(g, zeros(g, dtype::f32, {3, 1}), "mp_sync_w");
        step = variable(g, constant(g, int64_t(0)), "mp_sync_step", false);
      }
      auto d = g.device("/job:worker/task:" + std::to_string(r));
      x = placeholder(g, dtype::f32, {-1, 3}, "x");
      y = placeholder(g, dtype::f32, {-1, 1}, "y");
      auto loss = mean(square(matmul(x, w.value) - y));
      sgd = std::make_unique<gradient_descent_optimizer>(0.1);
      opt = std::make_unique<sync_replicas_optimizer>(
          *sgd, sync_replicas_options{.replicas_to_aggregate = 2, .total_num_replicas = 2,
                                      .replica = r,
                                      .worker_device = "/job:worker/task:" + std::to_string(r)});
      train = opt->minimize(loss, step);
      init = global_variables_initializer(g);
    }
  };
  const int steps = 8;
  replica r0(0), r1(1);
  session s0(client_runtime(), r0.g, "runnel://127.0.0.1:" + std::to_string(ports[1]));
  session s1(client_runtime(), r1.g, "runnel://127.0.0.1:" + std::to_string(ports[2]));
  REQUIRE(s0.run({r0.init}).ok());
  status other;
  std::thread t([&] {
    for (int k = 0; k < steps && other.ok(); ++k) {
      auto [xb, yb] = part(1, k);
      other = s1.run({{r1.x, xb}, {r1.y, yb}}, {}, {r1.train}).error();
    }
  });
  status chief;
  for (int k = 0; k < steps && chief.ok(); ++k) {
    auto [xb, yb] = part(0, k);
    chief = s0.run({{r0.x, xb}, {r0.y, yb}}, {}, {r0.train}).error();
  }
  t.join();
  INFO(chief.to_string() << " / " << other.to_string() << "\nps log:\n" << ps.log());
  REQUIRE(chief.ok());
  REQUIRE(other.ok());
  auto w_sync = s0.run({}, {r0.w.value}).value()[0];
  // One process: w -= 0.1 * mean of the two replicas' gradients, step by step.
  graph g;
  auto w = variable(g, zeros(g, dtype::f32, {3, 1}), "mp_sync_ref_w");
  auto x0 = placeholder(g, dtype::f32, {-1, 3}), y0 = placeholder(g, dtype::f32, {-1, 1});
  auto x1 = placeholder(g, dtype::f32, {-1, 3}), y1 = placeholder(g, dtype::f32, {-1, 1});
  auto g0 = gradients({mean(square(matmul(x0, w.value) - y0))}, {w.ref})[0];
  auto g1 = gradients({mean(square(matmul(x1, w.value) - y1))}, {w.ref})[0];
  auto update = assign(w, w.value - (g0 + g1) * constant(g, 0.05f));
  session local(client_runtime(), g);
  REQUIRE(local.run({global_variables_initializer(g)}).ok());
  for (int k = 0; k < steps; ++k) {
    auto [xa, ya] = part(0, k);
    auto [xb, yb] = part(1, k);
    REQUIRE(local.run({{x0, xa}, {y0, ya}, {x1, xb}, {y1, yb}}, {}, {operation(update)}).ok());
  }
  check_close(w_sync, local.run({}, {w.value}).value()[0], 1e-5, 1e-6);
}

TEST_CASE("a node survives garbage on its port and keeps serving", "[multiprocess]") {
  auto dir = scratch("garbage");
  auto ports = free_ports(1);
  std::string addr = "127.0.0.1:" + std::to_string(ports[0]);
  node_process worker("worker=" + addr, "worker", 0, dir);
  REQUIRE(worker.wait_ready());
  std::string junk;
  for (int i = 0; i < 100000; ++i)
    junk += char((i * 131) % 256);
  for (int i = 0; i < 3; ++i)
    CHECK(net::send_raw_bytes(addr, junk).ok());
  CHECK(net::send_raw_bytes(addr, "RUNNEL02").ok()); // a preamble cut short
  CHECK(net::send_raw_bytes(addr, std::string("RUNNEL02\x01\0\0\0\xff\xff\xff\xff", 16)).ok());
  REQUIRE(worker.running());
  graph g;
  auto c = constant(g, 20.f) + 1.0;
  session s(client_runtime(), g, "runnel://" + addr);
  auto r = s.run({}, {c});
  REQUIRE(r.ok());
  CHECK(r.value()[0].data<float>()[0] == 21.f);
  CHECK_THAT(worker.log(), Catch::Contains("rejected a connection"));
}

TEST_CASE("a node that ran out of descriptors accepts again once they are free", "[multiprocess]") {
  auto dir = scratch("emfile");
  auto ports = free_ports(1);
  std::string addr = "127.0.0.1:" + std::to_string(ports[0]);
  node_process worker("worker=" + addr, "worker", 0, dir, {}, 64);
  REQUIRE(worker.wait_ready());
  {
    // Connections that never finish their handshake, beyond the node's 64 descriptors.
    std::vector<int> held;
    for (int i = 0; i < 100; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(uint16_t(ports[0]));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
      held.push_back(fd);
    }
    // The node says it could not accept (its log is the event to wait for).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (worker.log().find("accept failed") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_THAT(worker.log(), Catch::Contains("Too many open files"));
    for (int fd : held)
      ::close(fd);
  }
  // Accepting resumed: a step runs (it used to wait forever).
  graph g;
  auto c = constant(g, 20.f) + 1.0;
  session s(client_runtime(), g, "runnel://" + addr, {.remote_timeout = std::chrono::seconds(60)});
  auto r = s.run({}, {c});
  REQUIRE(r.ok());
  CHECK(r.value()[0].data<float>()[0] == 21.f);
  REQUIRE(worker.running());
}

TEST_CASE("runnel-node explains bad command lines", "[multiprocess]") {
  auto run = [](const std::string& args) {
    std::string cmd = std::string(RUNNEL_NODE_BINARY) + " " + args + " 2>&1";
    std::FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p))
      out += buf;
    int st = ::pclose(p);
    return std::make_pair(WEXITSTATUS(st), out);
  };
  auto help = run("--help");
  CHECK(help.first == 0);
  CHECK_THAT(help.second, Catch::Contains("--cluster SPEC"));
  auto bad = run("--cluster 'ps=127.0.0.1:1' --job worker --task 0");
  CHECK(bad.first != 0);
  CHECK_THAT(bad.second, Catch::Contains("no job 'worker'"));
  auto spec = run("--cluster 'ps=nonsense' --job ps --task 0");
  CHECK(spec.first != 0);
  CHECK_THAT(spec.second, Catch::Contains("not host:port"));
}
