// Step calls on connections of their own (net/step_plane.hpp): served off the event loop,
// tensors of every kind intact, the wire version checked both ways, malformed messages closing
// only their connection, and calls in flight failing with the task's address when its connection
// goes. Each case waits on the event it checks, never on a sleep.
#include <catch2/catch.hpp>

#include <cstring>
#include <future>
#include <set>
#include <thread>

#include "runnel/net/endpoint.hpp"
#include "runnel/net/wire_frame.hpp"
#include "runnel/tests/net/raw_peers.hpp"
#include "runnel/tests/net/wait_until.hpp"

using namespace runnel;
using namespace runnel::net;
using namespace runnel::testing;

namespace {

/// Echoes its feeds back, and notes the threads its calls came on: status() is served on the
/// endpoint's event loop, so its thread is the loop's.
class echo_worker : public worker_service {
public:
  worker_status status() override {
    std::lock_guard lock(mu);
    loop_thread = std::this_thread::get_id();
    return {{"worker", 0}, 5, {}, ""};
  }
  void register_graph(std::string, callback<std::string> done) override { done(std::string("h")); }
  void run_graph(const std::string&, int64_t, named_tensors feeds, std::vector<std::string>,
                 callback<named_tensors> done) override {
    {
      std::lock_guard lock(mu);
      run_threads.insert(std::this_thread::get_id());
    }
    done(std::move(feeds));
  }
  void cleanup_step(int64_t step) override { cleaned = step; }
  void deregister_graph(const std::string&) override {}
  std::mutex mu;
  std::thread::id loop_thread;
  std::set<std::thread::id> run_threads;
  std::atomic<int64_t> cleaned{0};
};

status heartbeat_of(remote_worker& w) {
  std::promise<status> p;
  w.heartbeat([&p](status s) { p.set_value(s); });
  return p.get_future().get();
}

std::string address_of(endpoint& server) {
  return "127.0.0.1:" + std::to_string(server.port());
}

} // namespace

TEST_CASE("step calls are served off the event loop, with tensors of every kind intact", "[net]") {
  for (bool step_calls : {true, false}) {
    CAPTURE(step_calls);
    echo_worker w;
    auto so = quiet_server();
    so.worker = &w;
    so.direct_payload_bytes = 1 << 20; // the 3 MB feed below is read into growing buffers
    auto server = endpoint::start(so).value();
    endpoint_options co;
    co.step_calls = step_calls;
    auto client = endpoint::start(co).value();
    auto remote = client->worker(address_of(*server));
    REQUIRE(wait_for<worker_status>([&](auto cb) { remote->status(cb); }).ok());

    std::vector<float> big(3 << 18);
    for (size_t i = 0; i < big.size(); ++i)
      big[i] = float(i) * 0.5f;
    named_tensors feeds{{"f", tensor::from_values<float>(shape{2}, {1.5f, -2.f})},
                        {"i", tensor::from_values<int64_t>(shape{1}, {int64_t(1) << 40})},
                        {"s", tensor::from_values<std::string>(shape{2}, {"", "word"})},
                        {"empty", tensor(dtype::f32, shape{0, 3})},
                        {"big", tensor::from_values<float>(shape{int64_t(big.size())}, big)}};
    auto r = wait_for<named_tensors>([&](auto cb) { remote->run_graph("h", 3, feeds, {"f"}, cb); });
    REQUIRE(r.ok());
    REQUIRE(r->size() == feeds.size());
    CHECK((*r)[0].second.data<float>()[1] == -2.f);
    CHECK((*r)[1].second.data<int64_t>()[0] == int64_t(1) << 40);
    CHECK((*r)[2].second.data<std::string>()[1] == "word");
    CHECK((*r)[3].second.shape() == shape{0, 3});
    CHECK((*r)[4].first == "big");
    CHECK(std::memcmp((*r)[4].second.raw_data(), big.data(), big.size() * 4) == 0);

    remote->cleanup_step(11);
    wait_until([&] { return w.cleaned.load() == 11; });
    CHECK(heartbeat_of(*remote).ok());
    std::lock_guard lock(w.mu);
    REQUIRE(w.run_threads.size() == 1);
    // On a step connection the call is read and run on the connection's thread, not the loop.
    CHECK((*w.run_threads.begin() != w.loop_thread) == step_calls);
  }
}

TEST_CASE("a peer of another wire version is refused, and the error names both versions",
          "[net][security]") {
  echo_worker w;
  auto so = quiet_server();
  so.worker = &w;
  auto server = endpoint::start(so).value();
  // An older or newer client: the node answers "another version" and its own.
  raw_conn old(server->port());
  std::string pre = make_preamble(conn_kind::step, "");
  pre[7] = '1';
  old.send(pre);
  CHECK(old.read_byte() == int(handshake_answer::bad_version));
  CHECK(old.read_byte() == wire_version);
  CHECK(old.read_to_close().empty());
  CHECK(server->stats().connections_rejected.load() == 1);

  // A node of another version, as a client of this build sees it.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  socklen_t len = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread other_node([listener] {
    int c = ::accept(listener, nullptr, nullptr);
    char head[preamble_bytes];
    [[maybe_unused]] auto n = ::recv(c, head, sizeof head, MSG_WAITALL);
    const char answer[2] = {char(handshake_answer::bad_version), 7};
    [[maybe_unused]] auto m = ::send(c, answer, 2, MSG_NOSIGNAL);
    ::close(c);
  });
  auto client = endpoint::start({}).value();
  auto address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  auto r = wait_for<named_tensors>(
      [&](auto cb) { client->worker(address)->run_graph("h", 1, {}, {}, cb); });
  other_node.join();
  ::close(listener);
  REQUIRE(!r.ok());
  CHECK(r.error().code() == error_code::unavailable);
  CHECK_THAT(r.error().message(), Catch::Contains(address) &&
                                      Catch::Contains("speaks Runnel wire version 7") &&
                                      Catch::Contains("this process speaks version 2"));
}

TEST_CASE("a malformed step message closes its connection only, and is logged", "[net][security]") {
  echo_worker w;
  auto so = quiet_server();
  std::mutex log_mu;
  std::vector<std::string> logged;
  so.log = [&](const std::string& line) {
    std::lock_guard lock(log_mu);
    logged.push_back(line);
  };
  so.worker = &w;
  auto server = endpoint::start(so).value();
  auto client = endpoint::start({}).value();
  auto remote = client->worker(address_of(*server));
  REQUIRE(heartbeat_of(*remote).ok()); // a step connection of the client's is open

  raw_conn bad(server->port());
  bad.send(make_preamble(conn_kind::step, ""));
  REQUIRE(bad.read_byte() == int(handshake_answer::ok));
  std::string frame(4, '\0');
  uint32_t length = 24;
  std::memcpy(frame.data(), &length, 4);
  frame += std::string(24, '\xff'); // not a Cap'n Proto message
  bad.send(frame);
  CHECK(bad.read_to_close().empty());
  wait_until([&] { return server->stats().frames_rejected.load() == 1; });
  {
    std::lock_guard lock(log_mu);
    bool named = false;
    for (auto& l : logged)
      named |= l.find("step connection from 127.0.0.1: message 0 rejected") != std::string::npos;
    CHECK(named);
  }
  // The other connection, and the node, go on.
  auto x = tensor::from_values<float>(shape{1}, {4.f});
  auto r = wait_for<named_tensors>([&](auto cb) {
    remote->run_graph("h", 1, named_tensors{{"x", x}}, {}, cb);
  });
  REQUIRE(r.ok());
  CHECK((*r)[0].second.data<float>()[0] == 4.f);
}

TEST_CASE("step calls in flight fail naming the task when its connection goes, and the next call "
          "reconnects",
          "[net]") {
  never_answering_worker w;
  auto so = quiet_server();
  so.worker = &w;
  auto server = endpoint::start(so).value();
  auto address = address_of(*server);
  endpoint_options co;
  co.task_names[address] = "/job:worker/replica:0/task:3"; // as a node knows its cluster
  auto client = endpoint::start(co).value();
  auto remote = client->worker(address);
  std::promise<result<named_tensors>> held;
  remote->run_graph("h", 1, {}, {}, [&](result<named_tensors> r) { held.set_value(r); });
  REQUIRE(heartbeat_of(*remote).ok()); // the call has gone out on the same connection
  client->forget_peer(address);        // as a master does with a task it gave up on
  auto r = held.get_future().get();
  REQUIRE(!r.ok());
  CHECK(r.error().code() == error_code::unavailable);
  CHECK_THAT(r.error().message(),
             Catch::Contains("task /job:worker/replica:0/task:3 at " + address));
  w.answer_all(); // its reply goes nowhere

  // A fresh connection; then the node goes away with a call in flight.
  std::promise<result<named_tensors>> lost;
  remote->run_graph("h", 2, {}, {}, [&](result<named_tensors> r) { lost.set_value(r); });
  REQUIRE(heartbeat_of(*remote).ok());
  server.reset();
  auto l = lost.get_future().get();
  REQUIRE(!l.ok());
  CHECK(l.error().code() == error_code::unavailable);
  CHECK_THAT(
      l.error().message(),
      Catch::Contains("connection to task /job:worker/replica:0/task:3 at " + address + " lost"));
  w.answer_all();
}

namespace {

/// The IP TOS byte of every TCP socket of this process connected to or accepted on `port`:
/// (TOS of the connections dialled to it, TOS of those it accepted).
std::pair<std::multiset<int>, std::multiset<int>> traffic_classes(int port) {
  std::multiset<int> dialled, accepted;
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in local{}, peer{};
    socklen_t n = sizeof local, m = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &n) != 0 ||
        local.sin_family != AF_INET ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &m) != 0)
      continue; // not a socket, not IPv4, or a listener
    int tos = -1;
    socklen_t t = sizeof tos;
    REQUIRE(::getsockopt(fd, IPPROTO_IP, IP_TOS, &tos, &t) == 0);
    if (ntohs(peer.sin_port) == port)
      dialled.insert(tos);
    else if (ntohs(local.sin_port) == port)
      accepted.insert(tos);
  }
  return {dialled, accepted};
}

} // namespace

TEST_CASE("each connection kind carries its traffic class: tensors theirs, calls and step calls "
          "the calls', replies the server's",
          "[net]") {
  for (bool step_calls : {true, false}) {
    CAPTURE(step_calls);
    echo_worker w;
    received got;
    auto so = quiet_server();
    so.worker = &w;
    so.rpc_tos = 0x68; // what an accepted connection sends: replies, acks
    so.on_tensor = [&](int64_t step, std::string key, tensor t) { got.add(step, key, t); };
    auto server = endpoint::start(so).value();
    endpoint_options co;
    co.step_calls = step_calls;
    co.data_tos = 0x20; // a lower class for bulk tensors
    co.rpc_tos = 0xb8;  // expedited for calls
    auto client = endpoint::start(co).value();
    auto remote = client->worker(address_of(*server));
    REQUIRE(wait_for<worker_status>([&](auto cb) { remote->status(cb); }).ok());
    auto r = wait_for<named_tensors>([&](auto cb) {
      remote->run_graph("h", 1, {{"f", tensor::scalar<float>(1.f)}}, {"f"}, cb);
    });
    REQUIRE(r.ok());
    REQUIRE(send_and_wait(*client, address_of(*server), 1, "t", tensor::scalar<float>(2.f)).ok());
    REQUIRE(got.wait(1));

    auto [dialled, accepted] = traffic_classes(server->port());
    // RPC and data always; a step connection of its own with step calls, in the calls' class
    // (in the tensors' class, runGraph calls queued behind gradients: docs/cluster.md).
    CHECK(dialled.count(0x20) == 1);
    CHECK(dialled.count(0xb8) == (step_calls ? 2 : 1));
    CHECK(dialled.size() == (step_calls ? 3 : 2));
    CHECK(accepted.size() == dialled.size());
    CHECK(accepted.count(0x68) == accepted.size());
  }
}
