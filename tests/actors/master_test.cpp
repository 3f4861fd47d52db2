// The master against a scripted worker on a real loopback endpoint: how steps in flight end when
// a task fails one of them; a client cancelling its steps. Each case waits on the event it
// checks, never on a sleep.
#include <catch2/catch.hpp>

#include <future>
#include <mutex>

#include "runnel/actors/exec/session.hpp"
#include "runnel/net/endpoint.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/tests/actors/cluster_nodes.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

/// One worker task with one CPU: it registers anything, holds the first runGraph call it gets
/// and fails every later one with ABORTED, as a task that restarted under a step does.
class holding_worker : public net::worker_service {
public:
  std::string cluster;
  std::promise<void> first_arrived;

  net::worker_status status() override {
    return {{"worker", 0},
            7,
            {{"/job:worker/replica:0/task:0/device:cpu:0", "CPU", int64_t(1) << 30, 1e10, 1e10}},
            cluster};
  }
  void register_graph(std::string, net::callback<std::string> done) override {
    done(std::string("part"));
  }
  void run_graph(const std::string&, int64_t, net::named_tensors, std::vector<std::string>,
                 net::callback<net::named_tensors> done) override {
    std::unique_lock lock(mu_);
    if (!held_) {
      held_ = std::move(done);
      lock.unlock();
      first_arrived.set_value();
      return;
    }
    lock.unlock();
    done(aborted("the task restarted under the step"));
  }
  void cleanup_step(int64_t) override {}
  void deregister_graph(const std::string&) override {}
  /// Answers the held call (its reply goes nowhere once the master gave up on it).
  void release() {
    std::lock_guard lock(mu_);
    if (held_)
      held_(cancelled("released"));
    held_ = nullptr;
  }

private:
  std::mutex mu_;
  net::callback<net::named_tensors> held_;
};

} // namespace

TEST_CASE("when a task fails one step, the master ends its other steps on that task too, and "
          "nothing hangs",
          "[actors][cluster]") {
  holding_worker w;
  net::endpoint_options so;
  so.listen = "127.0.0.1:0";
  so.worker = &w;
  auto server = net::endpoint::start(so).value();
  std::string address = "127.0.0.1:" + std::to_string(server->port());
  w.cluster = "worker=" + address;

  graph g;
  auto x = placeholder(g, dtype::f32, {2}, "x");
  auto y = x + 1.0;
  session s(client_runtime(), g, "runnel://" + address,
            session_options{.in_process_master = false, .client_master = true});
  feed_list feeds{{x, tensor::from_values<float>(shape{2}, {1, 2})}};
  // Step A is held by the task; step B, on the same connection, fails with ABORTED. The master
  // then drops its connections to the task, which fails A's call at once on the same thread:
  // A's reply must not wait for a lock B's reply holds (it did, and both runs hung).
  auto a = std::async(std::launch::async, [&] { return s.run(feeds, {y}); });
  w.first_arrived.get_future().wait();
  auto b = std::async(std::launch::async, [&] { return s.run(feeds, {y}); });
  REQUIRE(b.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  REQUIRE(a.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  auto rb = b.get();
  auto ra = a.get();
  REQUIRE(!rb.ok());
  CHECK(rb.error().code() == error_code::aborted);
  REQUIRE(!ra.ok());
  INFO(ra.error().to_string());
  CHECK(ra.error().code() == error_code::unavailable);
  CHECK_THAT(ra.error().message(), Catch::Contains(address));
  w.release();
}

namespace {

/// A step interrupted as Ctrl-C does, on a cluster: cancelled on its tasks, and nothing lost.
void interrupt_a_step(const ps_and_worker& n, const session_options& o, const std::string& tag) {
  graph g;
  // A step that signals it has started (it enqueues into `started`), then waits for an
  // element of `never`, which only comes after it was cancelled.
  auto started = fifo_queue(g, {dtype::i32}, {.shapes = {{}}}, "started" + tag);
  auto never = fifo_queue(g, {dtype::i32}, {.shapes = {{}}}, "never" + tag);
  auto v = placeholder(g, dtype::i32, {}, "v");
  auto signal = started.enqueue({v}, "signal");
  auto wait = never.dequeue("wait");
  auto saw_start = started.dequeue("saw_start");
  auto put = never.enqueue({v}, "put");
  session s(client_runtime(), g, n.target(), o), watcher(client_runtime(), g, n.target(), o);
  run_options ro;
  int asked = 0;
  // Asked while the step waits: once the watcher has seen it start on its task, interrupt.
  ro.interrupted = [&] {
    ++asked;
    auto r = watcher.run({}, {saw_start[0]});
    REQUIRE(r.ok());
    return true;
  };
  auto r = s.run({{v, tensor::scalar<int32_t>(1)}}, {wait[0]}, {signal}, ro, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::cancelled);
  CHECK_THAT(r.error().message(), Catch::Contains("interrupted"));
  CHECK(asked == 1);
  // The session goes on; the cancelled step's dequeue takes nothing: the element put now is
  // the next step's.
  auto put_r = s.run({{v, tensor::scalar<int32_t>(7)}}, {}, {put});
  INFO((put_r.ok() ? std::string("ok") : put_r.error().to_string()));
  REQUIRE(put_r.ok());
  auto next = s.run({}, {wait[0]});
  INFO((next.ok() ? std::string("ok") : next.error().to_string()));
  REQUIRE(next.ok());
  check_equal(next.value()[0], tensor::scalar<int32_t>(7));
}

/// A step past run_options::timeout, on a cluster: it fails, and is cancelled on its tasks.
void time_out_a_step(const ps_and_worker& n, const session_options& o, const std::string& tag) {
  graph g;
  auto q = fifo_queue(g, {dtype::i32}, {.shapes = {{}}}, "timed" + tag);
  auto v = placeholder(g, dtype::i32, {}, "v");
  auto put = q.enqueue({v}, "put");
  auto take = q.dequeue("take");
  session s(client_runtime(), g, n.target(), o);
  // The signature runs once first: its partitions are registered, so the timed step starts
  // on its tasks as soon as the master has it, before the cancel the timeout sends.
  REQUIRE(s.run({{v, tensor::scalar<int32_t>(1)}}, {}, {put}).ok());
  REQUIRE(s.run({}, {take[0]}).ok());
  run_options ro;
  ro.timeout = std::chrono::milliseconds(100);
  auto r = s.run({}, {take[0]}, {}, ro, nullptr); // the queue is empty: it cannot finish
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::deadline_exceeded);
  CHECK_THAT(r.error().message(),
             Catch::Contains("run_options::timeout") && Catch::Contains("was asked to cancel it"));
  REQUIRE(s.run({{v, tensor::scalar<int32_t>(9)}}, {}, {put}).ok());
  auto next = s.run({}, {take[0]});
  REQUIRE(next.ok());
  check_equal(next.value()[0], tensor::scalar<int32_t>(9));
}

} // namespace

TEST_CASE("a step on a cluster cancelled by its client (Ctrl-C, a timeout) ends on its tasks, "
          "and nothing is lost",
          "[actors][cluster]") {
  auto n = start_ps_and_worker();
  for (bool client_master : {false, true}) {
    INFO("client master " << client_master);
    session_options o{.in_process_master = false, .client_master = client_master};
    std::string tag = client_master ? "_client" : "_remote";
    interrupt_a_step(n, o, tag);
    time_out_a_step(n, o, tag);
  }
}
