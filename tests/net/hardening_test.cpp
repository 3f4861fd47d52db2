// What a node does with strangers and with peers that misbehave: hostile frame headers, no
// token beyond loopback, handshakes and connections that go quiet, connection and call limits,
// and values for steps nobody runs. Each case waits on the event it checks (the server closing
// the connection, a reply), never on a sleep.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "runnel/net/endpoint.hpp"
#include "runnel/net/wire_frame.hpp"
#include "runnel/tests/net/raw_peers.hpp"
#include "runnel/tests/net/wait_until.hpp"

using namespace runnel;
using namespace runnel::net;
using namespace runnel::testing;

TEST_CASE("frame headers whose sizes overflow or lie are refused before anything is allocated",
          "[net][security]") {
  frame_header h;
  h.type = dtype::f32;
  h.key = "k";
  // 2^62+1 x 4 elements: the product wraps around 64 bits to a small number.
  h.shape = shape{(int64_t(1) << 62) + 1, 4};
  h.payload_bytes = 16;
  auto bytes = encode_frame_header(h);
  auto words = std::vector<uint64_t>((bytes.size() - 4) / 8);
  std::memcpy(words.data(), bytes.data() + 4, bytes.size() - 4);
  auto r = decode_frame_header(words.data(), bytes.size() - 4, {});
  REQUIRE(!r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("2^40"));

  // A payload that does not match the shape, and one over the limit.
  h.shape = shape{1024};
  h.payload_bytes = 1024; // f32 needs 4096
  bytes = encode_frame_header(h);
  words.assign((bytes.size() - 4) / 8, 0);
  std::memcpy(words.data(), bytes.data() + 4, bytes.size() - 4);
  CHECK(!decode_frame_header(words.data(), bytes.size() - 4, {}).ok());
  h.payload_bytes = 4096;
  bytes = encode_frame_header(h);
  std::memcpy(words.data(), bytes.data() + 4, bytes.size() - 4);
  CHECK(decode_frame_header(words.data(), bytes.size() - 4, {}).ok());
  CHECK(!decode_frame_header(words.data(), bytes.size() - 4, {.max_payload_bytes = 4095}).ok());

  CHECK(shape{(int64_t(1) << 62) + 1, 4}.num_elements() > shape::max_elements);
  CHECK(shape{(int64_t(1) << 62) + 1, 0}.num_elements() == 0);
  CHECK_THROWS(tensor(dtype::f32, shape{(int64_t(1) << 62) + 1, 4}));
}

TEST_CASE("a node drops an overflowing frame sent to it and keeps serving", "[net][security]") {
  std::atomic<int> delivered{0};
  auto o = quiet_server();
  o.on_tensor = [&](int64_t, std::string, tensor) { delivered++; };
  auto server = endpoint::start(o).value();
  raw_conn c(server->port());
  c.send(make_preamble(conn_kind::data, ""));
  REQUIRE(c.read_byte() == int(handshake_answer::ok));
  frame_header h;
  h.type = dtype::f32;
  h.key = "k";
  h.shape = shape{(int64_t(1) << 62) + 1, 4};
  h.payload_bytes = 16;
  c.send(encode_frame_header(h) + std::string(16, 'x'));
  CHECK(c.read_to_close().empty()); // the node closed the connection on the bad frame
  CHECK(server->stats().frames_rejected.load() == 1);
  CHECK(delivered.load() == 0);

  // A header announcing 16 GiB, then silence: nothing of that size is reserved, and the
  // connection is gone once the sender is.
  {
    raw_conn big(server->port());
    big.send(make_preamble(conn_kind::data, ""));
    REQUIRE(big.read_byte() == int(handshake_answer::ok));
    h.shape = shape{int64_t(1) << 32};
    h.payload_bytes = uint64_t(1) << 34;
    int64_t live_before = tensor_memory_statistics().live_bytes;
    big.send(encode_frame_header(h) + std::string(1000, 'x'));
    // The node has read the header (a valid frame: it waits for the payload) and allocated
    // only what arrived; a status call on another connection proves the loop moved on.
    endpoint_options co;
    auto client = endpoint::start(co).value();
    tensor t = tensor::scalar<float>(1);
    std::promise<status> sent;
    client->send_tensor("127.0.0.1:" + std::to_string(server->port()), 1, "fine", t, {},
                        [&](status s) { sent.set_value(s); });
    REQUIRE(sent.get_future().get().ok());
    CHECK(tensor_memory_statistics().live_bytes - live_before < (int64_t(1) << 30));
  }
}

TEST_CASE("a listener other hosts can reach needs a token or an explicit opt-out",
          "[net][security]") {
  auto o = quiet_server();
  o.listen = "0.0.0.0:0";
  auto refused = endpoint::start(o);
  REQUIRE(!refused.ok());
  CHECK_THAT(refused.error().message(), Catch::Contains("auth token"));
  o.auth_token = "t0ken";
  auto with_token = endpoint::start(o);
  REQUIRE(with_token.ok());
  CHECK(!(*with_token)->loopback_only());
  o.auth_token.clear();
  o.allow_unauthenticated = true;
  CHECK(endpoint::start(o).ok());
  auto loop = endpoint::start(quiet_server()).value();
  CHECK(loop->loopback_only());
}

TEST_CASE("tokens are compared whole, whatever their lengths", "[net][security]") {
  auto eq = [](const std::string& a, const std::string& b) {
    return tokens_equal(reinterpret_cast<const uint8_t*>(a.data()), a.size(), b);
  };
  CHECK(eq("secret", "secret"));
  CHECK(!eq("secreT", "secret"));
  CHECK(!eq("secret", "secret!"));
  CHECK(!eq("", "secret"));
  CHECK(!eq("secret", ""));
  CHECK(eq("", ""));
  CHECK(!eq("secretsecret", "secret")); // the cycled comparison must not accept repeats
}

TEST_CASE("a peer that never finishes its handshake is closed after the handshake timeout",
          "[net][security]") {
  auto o = quiet_server();
  o.handshake_timeout = std::chrono::milliseconds(200);
  auto server = endpoint::start(o).value();
  raw_conn silent(server->port());
  CHECK(silent.read_to_close().empty());
  raw_conn dribbler(server->port());
  dribbler.send("RUNN"); // a quarter of the preamble, then nothing
  CHECK(dribbler.read_to_close().empty());
  // (The loop counts a timeout after it has closed the connection.)
  testing::wait_until([&] { return server->stats().handshake_timeouts.load() == 2; });
}

TEST_CASE("an idle connection is closed, and the client reconnects on its next call",
          "[net][security]") {
  never_answering_worker w;
  auto o = quiet_server();
  o.idle_timeout = std::chrono::milliseconds(300);
  o.worker = &w;
  auto server = endpoint::start(o).value();
  raw_conn idle(server->port());
  idle.send(make_preamble(conn_kind::data, ""));
  REQUIRE(idle.read_byte() == int(handshake_answer::ok));
  CHECK(idle.read_to_close().empty());
  testing::wait_until([&] { return server->stats().idle_closed.load() >= 1; });

  // A connection with a call in flight is not idle, however long the call takes: a step
  // connection, or with step calls off, an RPC connection.
  for (bool step_calls : {true, false}) {
    CAPTURE(step_calls);
    endpoint_options co;
    co.step_calls = step_calls;
    auto client = endpoint::start(co).value();
    auto address = "127.0.0.1:" + std::to_string(server->port());
    auto worker = client->worker(address);
    std::promise<result<named_tensors>> reply;
    worker->run_graph("h", 1, {}, {}, [&](result<named_tensors> r) { reply.set_value(r); });
    // The call is held by the service; a heartbeat on the same connection shows it is served.
    std::promise<status> beat;
    worker->heartbeat([&](status s) { beat.set_value(s); });
    REQUIRE(beat.get_future().get().ok());
    uint64_t closed_before = server->stats().idle_closed.load();
    // Wait past the idle timeout on the event of another idle connection closing.
    raw_conn marker(server->port());
    marker.send(make_preamble(conn_kind::data, ""));
    REQUIRE(marker.read_byte() == int(handshake_answer::ok));
    CHECK(marker.read_to_close().empty());
    testing::wait_until([&] { return server->stats().idle_closed.load() >= closed_before + 1; });
    CHECK(server->stats().idle_closed.load() == closed_before + 1); // only the marker
    w.answer_all();
    REQUIRE(reply.get_future().get().ok());
  }
}

TEST_CASE("connections past the per-host limit are refused as busy", "[net][security]") {
  never_answering_worker w;
  auto o = quiet_server();
  o.max_connections_per_peer = 2;
  o.worker = &w;
  auto server = endpoint::start(o).value();
  raw_conn a(server->port()), b(server->port()), c(server->port());
  for (auto* conn : {&a, &b})
    conn->send(make_preamble(conn_kind::data, ""));
  REQUIRE(a.read_byte() == int(handshake_answer::ok));
  REQUIRE(b.read_byte() == int(handshake_answer::ok));
  c.send(make_preamble(conn_kind::data, ""));
  CHECK(c.read_byte() == int(handshake_answer::busy));
  CHECK(server->stats().connections_refused_busy.load() == 1);
}

TEST_CASE("calls past the in-flight limit of a connection are answered resource_exhausted",
          "[net][security]") {
  never_answering_worker w;
  auto o = quiet_server();
  o.max_pending_rpcs = 2;
  o.worker = &w;
  auto server = endpoint::start(o).value();
  auto client = endpoint::start(endpoint_options{}).value();
  auto worker = client->worker("127.0.0.1:" + std::to_string(server->port()));
  std::vector<std::promise<result<named_tensors>>> replies(3);
  for (int i = 0; i < 3; ++i)
    worker->run_graph("h", i, {}, {},
                      [&replies, i](result<named_tensors> r) { replies[size_t(i)].set_value(r); });
  auto third = replies[2].get_future().get();
  REQUIRE(!third.ok());
  CHECK(third.error().code() == error_code::resource_exhausted);
  CHECK(server->stats().rpcs_refused.load() == 1);
  w.answer_all();
  CHECK(replies[0].get_future().get().ok());
  CHECK(replies[1].get_future().get().ok());
}

TEST_CASE("a connection cut in the middle of a tensor delivers nothing and the node goes on",
          "[net][security]") {
  std::atomic<int> delivered{0};
  std::promise<void> whole_arrived;
  auto o = quiet_server();
  o.on_tensor = [&](int64_t, std::string key, tensor) {
    delivered++;
    if (key == "whole")
      whole_arrived.set_value();
  };
  auto server = endpoint::start(o).value();
  frame_header h;
  h.type = dtype::f32;
  h.key = "half";
  h.shape = shape{256 * 1024};
  h.payload_bytes = 1 << 20;
  {
    raw_conn c(server->port());
    c.send(make_preamble(conn_kind::data, ""));
    REQUIRE(c.read_byte() == int(handshake_answer::ok));
    c.send(encode_frame_header(h) + std::string(size_t(1) << 19, 'x')); // half the payload
  } // cut
  // The next sender's tensor arrives whole (and the loop has dealt with the cut one by then).
  auto client = endpoint::start(endpoint_options{}).value();
  std::promise<status> sent;
  client->send_tensor("127.0.0.1:" + std::to_string(server->port()), 1, "whole",
                      tensor::scalar<float>(1), {}, [&](status s) { sent.set_value(s); });
  REQUIRE(sent.get_future().get().ok());
  REQUIRE(whole_arrived.get_future().wait_for(std::chrono::seconds(20)) ==
          std::future_status::ready);
  CHECK(delivered.load() == 1); // only the whole one
}
