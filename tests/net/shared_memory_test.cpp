// Tensors between two processes' endpoints on one host through a shared-memory ring
// (net/shm_ring.hpp): intact and in order, on the socket when the ring is full or the receiver
// will not map it, and a forged ring position or offer refused.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <fcntl.h>
#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <future>
#include <thread>

#include "runnel/net/endpoint.hpp"
#include "runnel/net/shm_ring.hpp"
#include "runnel/net/wire_frame.hpp"
#include "runnel/tests/net/raw_peers.hpp"
#include "runnel/tests/net/wait_until.hpp"

using namespace runnel;
using namespace runnel::net;
using namespace runnel::testing;

namespace {

tensor numbered(int64_t n, float base) {
  tensor t(dtype::f32, shape{n});
  for (int64_t i = 0; i < n; ++i)
    t.data<float>()[i] = base + float(i);
  return t;
}

} // namespace

TEST_CASE("tensors to a peer on this host go by shared memory, intact and in order, and by the "
          "socket when the ring is full",
          "[net]") {
  received got;
  std::promise<void> open_gate;
  auto gate = open_gate.get_future().share();
  auto so = quiet_server();
  // The first frame holds the receiver until the test opens the gate: the ring is not released
  // meanwhile, so the sender must fall back to the socket once it is full. Copies are kept (a
  // lent tensor would hold its bytes in the ring).
  so.on_tensor = [&](int64_t step, std::string key, tensor t) {
    if (step == 0)
      gate.wait();
    got.add(step, std::move(key), t.copy());
  };
  auto server = endpoint::start(so).value();
  endpoint_options co;
  co.shm_ring_bytes = 256 << 10; // payloads of at most 64 KiB go by the ring
  co.shm_min_payload_bytes = 16 << 10;
  auto client = endpoint::start(co).value();
  std::string address = "127.0.0.1:" + std::to_string(server->port());

  const int frames = 12;
  std::vector<std::promise<status>> sent(frames + 2);
  auto send = [&](int i, tensor t, send_options o = {}) {
    client->send_tensor(address, i, "t" + std::to_string(i), std::move(t), o,
                        [&sent, i](status s) { sent[size_t(i)].set_value(s); });
  };
  for (int i = 0; i < frames; ++i)
    send(i, numbered(10000, float(i) * 1e5f)); // 40 KB each: six fill the ring
  for (int i = 0; i < frames; ++i)
    REQUIRE(sent[size_t(i)].get_future().get().ok());
  uint64_t by_ring = client->stats().frames_sent_shm.load();
  CHECK(by_ring >= 1);
  CHECK(by_ring < uint64_t(frames));
  CHECK(client->stats().frames_shm_full.load() == uint64_t(frames) - by_ring);
  CHECK(client->stats().frames_sent.load() == uint64_t(frames));
  open_gate.set_value();
  REQUIRE(got.wait(frames));                               // all taken: the ring is empty again
  send(frames, numbered(100, 7.f));                        // small: the socket
  send(frames + 1, numbered(20000, -3.f), {.bf16 = true}); // 40 KB as bf16: the ring
  REQUIRE(sent[frames].get_future().get().ok());
  REQUIRE(sent[frames + 1].get_future().get().ok());
  REQUIRE(got.wait(frames + 2));

  std::lock_guard lock(got.mu);
  for (int i = 0; i < frames + 2; ++i) {
    CAPTURE(i);
    auto& [step, key, t] = got.items[size_t(i)];
    CHECK(step == i);
    CHECK(key == "t" + std::to_string(i));
    if (i < frames) {
      REQUIRE(t.num_elements() == 10000);
      CHECK(t.data<float>()[0] == float(i) * 1e5f);
      CHECK(t.data<float>()[9999] == float(i) * 1e5f + 9999.f);
    }
  }
  CHECK(std::get<2>(got.items[frames]).data<float>()[99] == 106.f);
  auto& half = std::get<2>(got.items[frames + 1]);
  CHECK(half.data<float>()[0] == -3.f);
  CHECK(half.data<float>()[1] == -2.f);
  CHECK(std::abs(half.data<float>()[19999] - 19996.f) < 19996.f / 128); // 8 bits of mantissa
  CHECK(server->stats().frames_received_shm.load() == by_ring + 1);
  CHECK(server->stats().frames_lent_shm.load() == by_ring); // the bf16 one is widened: a copy
  CHECK(client->stats().frames_sent_shm.load() == by_ring + 1);
  CHECK(client->stats().frames_shm_full.load() == uint64_t(frames) - by_ring); // no more
  CHECK(client->stats().frames_sent.load() == uint64_t(frames) + 2);
}

TEST_CASE("a receiver that will not share memory gets every payload on the socket", "[net]") {
  received got;
  auto so = quiet_server();
  so.shm_ring_bytes = 0; // as RUNNEL_SHM=0 does
  so.on_tensor = [&](int64_t step, std::string key, tensor t) { got.add(step, key, t); };
  auto server = endpoint::start(so).value();
  auto client = endpoint::start({}).value();
  std::string address = "127.0.0.1:" + std::to_string(server->port());
  REQUIRE(send_and_wait(*client, address, 1, "big", numbered(1 << 18, 1.f)).ok());
  REQUIRE(got.wait(1));
  CHECK(std::get<2>(got.items[0]).data<float>()[(1 << 18) - 1] == float(1 << 18));
  CHECK(client->stats().frames_sent_shm.load() == 0);
  CHECK(server->stats().frames_received_shm.load() == 0);
}

TEST_CASE("a forged ring offer is not mapped, a ring position without a ring or outside it is "
          "refused, and a ring caught up with starts over",
          "[net][security]") {
  auto so = quiet_server();
  so.on_tensor = [](int64_t, std::string, tensor) {};
  auto server = endpoint::start(so).value();

  // An offer naming a descriptor that is no ring (this process's stdin): answered "not mapped".
  raw_conn offer(server->port());
  shm_offer bogus;
  bogus.pid = uint32_t(::getpid());
  bogus.fd = 0;
  bogus.id = 42;
  offer.send(make_preamble(conn_kind::data_shm, "") + bogus.encode());
  CHECK(offer.read_byte() == int(handshake_answer::ok));
  CHECK(offer.read_byte() == 0);

  // A frame that says its payload is in a ring, on a plain data connection.
  raw_conn plain(server->port());
  plain.send(make_preamble(conn_kind::data, ""));
  REQUIRE(plain.read_byte() == int(handshake_answer::ok));
  frame_header h;
  h.key = "x";
  h.type = dtype::f32;
  h.shape = shape{4};
  h.payload_bytes = 16;
  h.in_shm = true;
  plain.send(encode_frame_header(h));
  CHECK(plain.read_to_close().empty());
  wait_until([&] { return server->stats().frames_rejected.load() == 1; });
  CHECK(server->stats().frames_received.load() == 0);

  // A ring that refuses a position outside it.
  auto ring = shm_ring::create(1 << 16);
  REQUIRE(ring);
  auto view = shm_view::open(ring->offer());
  REQUIRE(view.ok());
  std::vector<char> out(1 << 16);
  CHECK((*view)->take(1 << 15, (1 << 15) + 8, out.data()).code() == error_code::invalid_argument);
  float x = 2.5f;
  auto pos = ring->put({{&x, sizeof x}}, sizeof x);
  REQUIRE(pos);
  float y = 0;
  REQUIRE((*view)->take(*pos, sizeof y, &y).ok());
  CHECK(y == 2.5f);
  // The receiver has caught up: the next payload reuses the ring's first bytes.
  auto again = ring->put({{&x, sizeof x}}, sizeof x);
  REQUIRE(again);
  CHECK(*again > *pos);
  CHECK(*again % (1 << 16) == 0);
}

TEST_CASE("a float payload is lent from the ring in place and its bytes are reused only once "
          "the tensor goes, in order, while integers are copied",
          "[net]") {
  auto ring = shm_ring::create(1 << 16); // payloads of at most 16 KiB
  REQUIRE(ring);
  auto view = shm_view::open(ring->offer());
  REQUIRE(view.ok());
  auto& v = **view;
  std::vector<float> a(4096, 1.5f), b(4096, 2.5f), c(4096, 3.5f);
  auto put = [&](std::vector<float>& x) { return ring->put({{x.data(), 16384}}, 16384); };
  auto pa = put(a), pb = put(b), pc = put(c);
  REQUIRE((pa && pb && pc));
  auto lent = v.lend(*pa, dtype::f32, shape{64, 64});
  REQUIRE(lent.ok());
  tensor t = std::move(lent).value();
  CHECK(t.data<float>()[4095] == 1.5f);
  CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
  std::vector<float> out(4096);
  REQUIRE(v.take(*pb, 16384, out.data()).ok()); // copied, but after the lent one
  CHECK(out[0] == 2.5f);
  REQUIRE(v.take(*pc, 16384, out.data()).ok());
  CHECK(v.held() == 3);
  // The receiver has taken 48 KiB but released nothing the sender may reuse: one more fits in
  // the fourth quarter, and then nothing.
  auto pd = put(a);
  REQUIRE(pd);
  CHECK(!put(a));
  t = tensor(); // the lent payload goes: the three are reusable
  CHECK(v.held() == 0);
  REQUIRE(v.take(*pd, 16384, out.data()).ok());
  auto pe = put(c);
  REQUIRE(pe);
  CHECK(*pe % (1 << 16) == 0); // caught up: a new lap from the ring's start

  // Positions only go forward, integers are never lent, and a lent tensor keeps the mapping.
  CHECK(v.lend(*pa, dtype::f32, shape{4096}).error().code() == error_code::invalid_argument);
  auto ints = v.lend(*pe, dtype::i32, shape{4096});
  REQUIRE(!ints.ok());
  CHECK(ints.error().message().find("floating-point") != std::string::npos);
  tensor kept = v.lend(*pe, dtype::f32, shape{4096}).value();
  view = shm_view::open(ring->offer()); // the first view's last owner is now the tensor
  CHECK(kept.data<float>()[7] == 3.5f);
  kept = tensor();
}

TEST_CASE("a ring its sender could still shrink is not mapped", "[net][security]") {
  // A memfd with the ring's name and header, but not sealed: reading a lent tensor could fault.
  int fd = ::memfd_create("runnel-data", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 4096 + (1 << 16)) == 0);
  shm_offer o;
  o.pid = uint32_t(::getpid());
  o.fd = fd;
  o.id = 7;
  auto v = shm_view::open(o);
  REQUIRE(!v.ok());
  CHECK(v.error().message().find("not sealed") != std::string::npos);
  ::close(fd);
}

TEST_CASE("a sender one payload ahead of a receiver that holds the one before keeps using the "
          "ring, lap after lap",
          "[net]") {
  // As a ps sends the parameters of a step: most steps the worker has released everything (the
  // ring starts a new lap at its first pages), and now and then the next step's come while it
  // still holds this step's. The bytes skipped to start a lap are free once everything before
  // them is released; they once counted as held, so the payload put ahead went on the socket.
  for (uint64_t bytes : {uint64_t(16384), uint64_t(12288), uint64_t(5000)}) {
    CAPTURE(bytes);
    auto ring = shm_ring::create(1 << 16);
    REQUIRE(ring);
    auto view = shm_view::open(ring->offer());
    REQUIRE(view.ok());
    auto& v = **view;
    std::vector<float> x(bytes / sizeof(float), 0.5f);
    shape s{int64_t(bytes / sizeof(float))};
    auto send = [&]() -> tensor {
      auto pos = ring->put({{x.data(), bytes}}, bytes);
      REQUIRE(pos);
      return v.lend(*pos, dtype::f32, s).value();
    };
    tensor held = send();
    for (int step = 0; step < 30; ++step) {
      CAPTURE(step);
      if (step % 3 == 2) {
        held = send(); // put while the one before is still held; that one then goes
      } else {
        held = tensor(); // released: the receiver is caught up
        held = send();
      }
      CHECK(held.data<float>()[0] == 0.5f);
    }
    CHECK(v.held() == 1);
  }
}

TEST_CASE("a payload put into the ring in pieces of any size and alignment arrives byte for byte",
          "[net]") {
  // The ring copies with non-temporal stores in 64-byte blocks, with plain copies at the
  // unaligned head and the tail: every split of a payload must come out whole.
  auto ring = shm_ring::create(1 << 16);
  REQUIRE(ring);
  auto view = shm_view::open(ring->offer());
  REQUIRE(view.ok());
  std::vector<uint8_t> bytes(9000);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = uint8_t(i * 131 + 7);
  for (std::vector<size_t> split :
       {std::vector<size_t>{9000}, {3, 1000, 77, 7920}, {1, 1, 62, 8936}, {4999, 1, 4000}}) {
    std::vector<std::pair<const void*, size_t>> pieces;
    size_t at = 0;
    for (size_t n : split) {
      pieces.emplace_back(bytes.data() + at, n);
      at += n;
    }
    REQUIRE(at == bytes.size());
    auto pos = ring->put(pieces, bytes.size());
    REQUIRE(pos);
    std::vector<uint8_t> out(bytes.size());
    REQUIRE((*view)->take(*pos, out.size(), out.data()).ok());
    CHECK(out == bytes);
  }
}

TEST_CASE("frames written by their sending threads arrive whole and in order, and a receiver "
          "restarted on its address gets the next one",
          "[net]") {
  for (bool direct : {true, false}) {
    CAPTURE(direct);
    received got;
    auto so = quiet_server();
    so.on_tensor = [&](int64_t step, std::string key, tensor t) { got.add(step, key, t.copy()); };
    auto server = endpoint::start(so).value();
    int port = server->port();
    endpoint_options co;
    co.direct_sends = direct;
    auto client = endpoint::start(co).value();
    std::string address = "127.0.0.1:" + std::to_string(port);
    // Sent at once: the first ones wait while the connection opens. Small and ring-sized
    // payloads, strings and bf16.
    const int frames = 24;
    std::vector<std::promise<status>> sent(frames);
    for (int i = 0; i < frames; ++i) {
      tensor t = i % 6 == 5 ? tensor::scalar<std::string>("s" + std::to_string(i))
                            : numbered(i % 2 ? 100 : 40000, float(i));
      client->send_tensor(address, i, "t" + std::to_string(i), t, {.bf16 = i % 6 == 3},
                          [&sent, i](status s) { sent[size_t(i)].set_value(s); });
    }
    for (auto& p : sent)
      REQUIRE(p.get_future().get().ok());
    REQUIRE(got.wait(frames));
    {
      std::lock_guard lock(got.mu);
      for (int i = 0; i < frames; ++i) {
        CAPTURE(i);
        auto& [step, key, t] = got.items[size_t(i)];
        CHECK(step == i);
        if (i % 6 == 5)
          CHECK(t.data<std::string>()[0] == "s" + std::to_string(i));
        else
          CHECK(t.data<float>()[t.num_elements() - 1] == float(i) + float(t.num_elements() - 1));
      }
    }
    CHECK(client->stats().frames_sent.load() == uint64_t(frames));
    CHECK(client->stats().frames_sent_shm.load() == uint64_t(frames / 2)); // the 40,000 floats
    // Two threads at once: each one's frames in its order.
    auto burst = [&](int from) {
      for (int i = from; i < from + 40; ++i)
        REQUIRE(send_and_wait(*client, address, i, "b", numbered(i % 3 ? 10 : 20000, 0.f)).ok());
    };
    std::thread other(burst, 1000);
    burst(2000);
    other.join();
    REQUIRE(got.wait(frames + 80));
    {
      std::lock_guard lock(got.mu);
      int64_t last[2] = {999, 1999};
      for (int i = frames; i < frames + 80; ++i) {
        int64_t step = std::get<0>(got.items[size_t(i)]);
        CHECK(step == ++last[step >= 2000]);
      }
    }
    // The receiver goes, and another takes its address: nothing sent to it is lost.
    server.reset();
    so.listen = address;
    server = endpoint::start(so).value();
    for (int64_t n : {100, 40000}) {
      CAPTURE(n);
      REQUIRE(send_and_wait(*client, address, 100 + n, "after", numbered(n, 1.f)).ok());
    }
    REQUIRE(got.wait(frames + 82));
  }
}
