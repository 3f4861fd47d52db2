// What a cluster node keeps of what strangers send it, what it serves as metrics, and how long a
// client waits for a master that never answers.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <future>

#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/actors/exec/rendezvous.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/net/endpoint.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/tests/ports.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

tensor mib_tensor() {
  return tensor(dtype::f32, shape{256 * 1024});
}

/// GET `path` from 127.0.0.1:`port`; the whole response.
std::string http_get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  REQUIRE(::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == ssize_t(req.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    out.append(buf, size_t(n));
  ::close(fd);
  return out;
}

} // namespace

TEST_CASE("values for steps nobody runs are bounded in bytes and time, and a running step keeps its own",
          "[actors][security]") {
  local_rendezvous r;
  r.set_unclaimed_limits(uint64_t(4) << 20, std::chrono::hours(1));
  // A value that arrives before its step begins (the sender is ahead) is received.
  r.send_remote(8, "early", tensor::scalar<float>(3));
  r.begin_step(8);
  std::promise<float> early;
  r.recv(8, "early", [&](status, tensor t) { early.set_value(t.data<float>()[0]); });
  CHECK(early.get_future().get() == 3);
  // 300 x 1 MiB for steps that never run here: at most 4 MiB stay.
  for (int i = 0; i < 300; ++i)
    r.send_remote(1000 + i, "k", mib_tensor());
  CHECK(r.unclaimed_bytes() <= (uint64_t(4) << 20));
  CHECK(r.unclaimed_dropped() == 296);
  // A step that runs here keeps what arrives for it, over the limit.
  r.begin_step(7);
  for (int i = 0; i < 8; ++i)
    r.send_remote(7, "k" + std::to_string(i), mib_tensor());
  std::promise<tensor> got;
  r.recv(7, "k5", [&](status s, tensor t) {
    REQUIRE(s.ok());
    got.set_value(t);
  });
  CHECK(got.get_future().get().num_elements() == 256 * 1024);
  r.end_step(7);
  r.end_step(8);
  // With no time to wait, an unclaimed value goes at the next arrival.
  r.set_unclaimed_limits(uint64_t(4) << 20, std::chrono::milliseconds(0));
  uint64_t dropped = r.unclaimed_dropped();
  r.send_remote(5000, "k", mib_tensor());
  CHECK(r.unclaimed_dropped() == dropped + 4); // the four left from the flood
  CHECK(r.unclaimed_bytes() == uint64_t(1) << 20);
}

TEST_CASE("a node serves Prometheus metrics with its steps, connections and process gauges",
          "[actors][security]") {
  auto ports = free_ports(2);
  auto spec = cluster_spec::parse("worker=127.0.0.1:" + std::to_string(ports[0])).value();
  node_options o;
  o.cluster = spec;
  o.job = "worker";
  o.task = 0;
  o.metrics = "127.0.0.1:0";
  o.log = [](const std::string&, const std::string&) {};
  auto node = cluster_node::start(o).value();
  REQUIRE(node->metrics_port() > 0);
  // One step through the node, so that the counters move.
  runtime client;
  graph g;
  {
    auto d = g.device("/job:worker/task:0");
    auto x = constant(g, {1.f, 2.f});
    auto y = add(x, x, "y");
    session s(client, g, "runnel://" + spec.address("worker", 0).value());
    REQUIRE(s.run({}, {y}).ok());
  }
  auto text = http_get(node->metrics_port(), "/metrics");
  CHECK_THAT(text, Catch::StartsWith("HTTP/1.1 200"));
  CHECK_THAT(text, Catch::Contains("text/plain; version=0.0.4"));
  CHECK_THAT(text, Catch::Contains("runnel_steps_total{task=\"/job:worker/replica:0/task:0\",result=\"ok\"} 1"));
  CHECK_THAT(text, Catch::Contains("runnel_connections_accepted_total{task="));
  CHECK_THAT(text, Catch::Contains("runnel_process_open_fds{task="));
  CHECK_THAT(text, Catch::Contains("runnel_frames_sent_total{task=\"/job:worker/replica:0/"
                                   "task:0\",via=\"shared_memory\"} 0"));
  CHECK_THAT(text, Catch::Contains("runnel_shm_ring_full_total{task="));
  CHECK_THAT(text, Catch::Contains("# TYPE runnel_process_resident_bytes gauge"));
  CHECK_THAT(http_get(node->metrics_port(), "/other"), Catch::StartsWith("HTTP/1.1 404"));
}

TEST_CASE("creating a remote session gives up after remote_timeout when the master never answers",
          "[actors][security]") {
  // A master that takes the call and never replies (hung, or a node that is not what it says).
  class silent_master : public net::master_service {
  public:
    void create_session(std::string, bool, net::callback<std::string> done) override {
      held.push_back(std::move(done));
    }
    void extend_session(const std::string&, std::string, std::function<void(status)>) override {}
    void run(const std::string&, net::named_tensors, std::vector<std::string>,
             std::vector<std::string>, net::callback<std::vector<tensor>>) override {}
    void close_session(const std::string&) override {}
    void cancel_steps(const std::string&, std::function<void(status)>) override {}
    std::vector<net::callback<std::string>> held;
  } master;
  net::endpoint_options eo;
  eo.listen = "127.0.0.1:0";
  eo.master = &master;
  eo.log = [](const std::string&) {};
  auto ep = net::endpoint::start(eo).value();
  runtime client;
  graph g;
  auto x = constant(g, 1.f);
  session s(client, g, "runnel://127.0.0.1:" + std::to_string(ep->port()),
            {.remote_timeout = std::chrono::milliseconds(300)});
  auto r = s.run({}, {x});
  REQUIRE(!r.ok());
  CHECK(r.error().code() == error_code::deadline_exceeded);
  CHECK_THAT(r.error().message(), Catch::Contains("creating the session"));
}
