// The fault matrix across real processes: a ps, a worker that computes (worker 1) and the chief
// (worker 0, whose master runs the client's steps), each killed (SIGKILL) or stopped (SIGSTOP)
// at a random moment of a training run. Every case must end in an error naming the task (or its
// address) within a bounded time, never a hang; then the task comes back (restarted on the same
// address, or continued), the variables are restored from the checkpoint exactly, and the loss
// goes on down. Each step also moves a 16 MiB tensor from the ps to worker 1, so a stopped
// worker stops reading with its receive window full, and a kill can cut a tensor in the middle.
#include <catch2/catch.hpp>

#include <random>

#include "runnel/actors/state/saver.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/tests/cluster/node_process.hpp"
#include "runnel/tests/eval.hpp"
#include "runnel/tests/ports.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

struct model {
  graph g;
  output x, y, loss;
  operation train, init;
  model() {
    x = placeholder(g, dtype::f32, {-1, 3}, "x");
    y = placeholder(g, dtype::f32, {-1, 1}, "y");
    graph_variable w, b, ballast;
    {
      auto d = g.device("/job:ps/task:0");
      w = variable(g, zeros(g, dtype::f32, {3, 1}), "w");
      b = variable(g, zeros(g, dtype::f32, {1}), "b");
      ballast = variable(g, zeros(g, dtype::f32, {4 << 20}), "ballast", false);
    }
    {
      auto d = g.device("/job:worker/task:1");
      auto pred = matmul(x, w.value) + b.value;
      loss = mean(square(pred - y)) + sum(ballast.value) * 0.0;
      train = gradient_descent_optimizer(0.05).minimize(loss);
    }
    init = global_variables_initializer(g);
  }
};

std::pair<tensor, tensor> data() {
  tensor x(dtype::f32, shape{16, 3}), y(dtype::f32, shape{16, 1});
  for (int i = 0; i < 16; ++i) {
    float a = float(i % 4) - 1.5f, b = float(i / 4) - 1.5f, c = float((i * 7) % 5) - 2;
    float* r = x.data<float>() + i * 3;
    r[0] = a, r[1] = b, r[2] = c;
    y.data<float>()[i] = a - 2 * b + 0.5f * c + 0.25f;
  }
  return {x, y};
}

enum class role { ps, worker, chief };

void fault_case(role victim, int sig) {
  std::string name = victim == role::ps ? "ps" : victim == role::worker ? "worker1" : "chief";
  auto dir = scratch("fault-" + name + "-" + std::to_string(sig));
  auto ports = free_ports(3);
  std::vector<std::string> addr;
  for (int p : ports)
    addr.push_back("127.0.0.1:" + std::to_string(p));
  std::string cluster = "ps=" + addr[0] + ";worker=" + addr[1] + "," + addr[2];
  std::vector<std::string> opts = {"--heartbeat-timeout", "1"};
  auto start = [&](int i) {
    auto job = i == 0 ? "ps" : "worker";
    auto p = std::make_unique<node_process>(cluster, job, i == 0 ? 0 : i - 1, dir, opts);
    REQUIRE(p->wait_ready());
    return p;
  };
  std::vector<std::unique_ptr<node_process>> nodes;
  for (int i = 0; i < 3; ++i)
    nodes.push_back(start(i));
  int victim_index = victim == role::ps ? 0 : victim == role::worker ? 2 : 1;
  std::string victim_task = victim == role::ps       ? "/job:ps/replica:0/task:0"
                            : victim == role::worker ? "/job:worker/replica:0/task:1"
                                                     : addr[1];

  model m;
  saver sv(m.g);
  auto [xv, yv] = data();
  feed_list feeds{{m.x, xv}, {m.y, yv}};
  session_options so{.remote_timeout = std::chrono::seconds(3)};
  auto s = std::make_unique<session>(client_runtime(), m.g, "runnel://" + addr[1], so);
  REQUIRE(s->run({m.init}).ok());
  for (int step = 0; step < 5; ++step)
    REQUIRE(s->run(feeds, {m.loss}, {m.train}).ok());
  auto ckpt = sv.save(*s, (dir / "ckpt" / "model").string(), 5);
  REQUIRE(ckpt.ok());
  float saved_loss = s->run(feeds, {m.loss}).value()[0].data<float>()[0];

  // Train on, and hit the victim at a random moment.
  std::random_device rd;
  unsigned seed = rd();
  INFO("fault " << name << " signal " << sig << " seed " << seed);
  std::mt19937 rng(seed);
  std::atomic<int> steps{0};
  status failure;
  std::thread trainer([&] {
    for (;;) {
      auto r = s->run(feeds, {m.loss}, {m.train});
      if (!r.ok()) {
        failure = r.error();
        return;
      }
      ++steps;
    }
  });
  // A random point: after 1 to 12 steps, then 0 to 5 ms into the next.
  int after = int(rng() % 12) + 1;
  while (steps.load() < after)
    std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % 5000));
  auto t0 = std::chrono::steady_clock::now();
  if (sig == SIGSTOP)
    nodes[size_t(victim_index)]->stop();
  else
    nodes[size_t(victim_index)]->kill(SIGKILL);
  trainer.join();
  auto took = std::chrono::steady_clock::now() - t0;
  INFO(failure.to_string());
  CHECK(took < std::chrono::seconds(10));
  CHECK_THAT(failure.message(), Catch::Contains(victim_task));
  if (victim == role::chief && sig == SIGSTOP)
    CHECK(failure.code() == error_code::deadline_exceeded);
  else
    CHECK(failure.code() == error_code::unavailable);

  // Back: continued, or a new process on the same address.
  if (sig == SIGSTOP) {
    nodes[size_t(victim_index)]->kill(SIGCONT);
  } else {
    nodes[size_t(victim_index)].reset();
    nodes[size_t(victim_index)] = start(victim_index);
  }
  if (victim == role::chief && sig == SIGKILL) // the master it had is gone: a new session
    s = std::make_unique<session>(client_runtime(), m.g, "runnel://" + addr[1], so);
  status restored;
  for (int attempt = 0; attempt < 100; ++attempt) { // the first runs may still meet the old task
    restored = sv.restore(*s, *ckpt);
    if (restored.ok())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO(restored.to_string());
  REQUIRE(restored.ok());
  // The variables are what was saved, bit for bit: nothing half-written survived.
  CHECK(s->run(feeds, {m.loss}).value()[0].data<float>()[0] == saved_loss);
  for (int step = 0; step < 5; ++step) {
    auto r = s->run(feeds, {m.loss}, {m.train});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
  }
  CHECK(s->run(feeds, {m.loss}).value()[0].data<float>()[0] < saved_loss);
}

} // namespace

TEST_CASE("fault matrix: the ps killed", "[multiprocess][faults]") {
  fault_case(role::ps, SIGKILL);
}
TEST_CASE("fault matrix: the ps stopped", "[multiprocess][faults]") {
  fault_case(role::ps, SIGSTOP);
}
TEST_CASE("fault matrix: a worker killed", "[multiprocess][faults]") {
  fault_case(role::worker, SIGKILL);
}
TEST_CASE("fault matrix: a worker stopped with its receive window full", "[multiprocess][faults]") {
  fault_case(role::worker, SIGSTOP);
}
TEST_CASE("fault matrix: the chief killed", "[multiprocess][faults]") {
  fault_case(role::chief, SIGKILL);
}
TEST_CASE("fault matrix: the chief stopped", "[multiprocess][faults]") {
  fault_case(role::chief, SIGSTOP);
}
