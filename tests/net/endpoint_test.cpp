// The network endpoint on loopback: RPC calls to a worker service, tensors over the data plane,
// bad tokens and garbage.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "runnel/net/endpoint.hpp"
#include "runnel/tests/net/raw_peers.hpp"

using namespace runnel;
using namespace runnel::net;
using namespace runnel::testing;

namespace {

// A worker service that doubles float feeds; "slow" handles answer from another thread later.
class fake_worker : public worker_service {
public:
  worker_status status() override {
    return {{"worker", 3}, 42, {{"/job:worker/replica:0/task:3/device:CPU:0", "CPU", 1 << 20, 1e9, 1e9}},
            "worker=127.0.0.1:1"};
  }
  void register_graph(std::string bytes, callback<std::string> done) override {
    if (bytes == "bad")
      done(invalid_argument("graph is bad"));
    else
      done("handle-" + std::to_string(bytes.size()));
  }
  void run_graph(const std::string& handle, int64_t step_id, named_tensors feeds,
                 std::vector<std::string> fetches, callback<named_tensors> done) override {
    auto answer = [=]() mutable {
      named_tensors out;
      for (auto& [name, t] : feeds) {
        tensor d(t.type(), t.shape());
        for (int64_t i = 0; i < t.num_elements(); ++i)
          d.data<float>()[i] = 2 * t.data<float>()[i];
        out.emplace_back(name + "@" + std::to_string(step_id), d);
      }
      (void)fetches;
      done(std::move(out));
    };
    if (handle == "slow")
      std::thread([answer]() mutable {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        answer();
      }).detach();
    else
      answer();
  }
  void cleanup_step(int64_t step) override { cleaned = step; }
  void deregister_graph(const std::string&) override {}
  std::atomic<int64_t> cleaned{0};
};

} // namespace

TEST_CASE("a worker service answers RPCs over loopback", "[net]") {
  fake_worker w;
  endpoint_options so;
  so.listen = "127.0.0.1:0";
  so.worker = &w;
  auto server = endpoint::start(so);
  REQUIRE(server.ok());
  int port = (*server)->port();
  REQUIRE(port > 0);
  std::string address = "127.0.0.1:" + std::to_string(port);
  auto client = endpoint::start({}).value();
  auto remote = client->worker(address);

  auto st = wait_for<worker_status>([&](auto cb) { remote->status(cb); });
  REQUIRE(st.ok());
  CHECK(st->task.job == "worker");
  CHECK(st->task.task == 3);
  CHECK(st->incarnation == 42);
  REQUIRE(st->devices.size() == 1);
  CHECK(st->devices[0].memory_bytes == 1 << 20);

  auto h = wait_for<std::string>([&](auto cb) { remote->register_graph("abc", cb); });
  CHECK(h.value() == "handle-3");
  auto bad = wait_for<std::string>([&](auto cb) { remote->register_graph("bad", cb); });
  REQUIRE(!bad.ok());
  CHECK(bad.error().code() == error_code::invalid_argument);
  CHECK(bad.error().message() == "graph is bad");

  for (std::string handle : {"fast", "slow"}) {
    auto x = tensor::from_values<float>(shape{3}, {1.5f, -2.f, 3.25f});
    auto r = wait_for<named_tensors>(
        [&](auto cb) { remote->run_graph(handle, 77, named_tensors{{"x", x}}, {"y"}, cb); });
    REQUIRE(r.ok());
    REQUIRE(r->size() == 1);
    CHECK((*r)[0].first == "x@77");
    CHECK((*r)[0].second.data<float>()[2] == 6.5f);
  }
  remote->cleanup_step(9);
  for (int i = 0; i < 200 && w.cleaned.load() != 9; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(w.cleaned.load() == 9);

  // Many calls in flight at once, from several threads.
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto x = tensor::from_values<float>(shape{1}, {float(i)});
        auto r = wait_for<named_tensors>(
            [&](auto cb) { remote->run_graph("fast", t * 100 + i, named_tensors{{"x", x}}, {}, cb); });
        if (r.ok() && (*r)[0].second.data<float>()[0] == 2.f * float(i))
          good++;
      }
    });
  for (auto& th : threads)
    th.join();
  CHECK(good.load() == 100);
}

TEST_CASE("calls to a task nobody serves fail as unavailable, naming its task and address",
          "[net]") {
  // Bind a port and close it again: nothing listens there now.
  int port;
  {
    endpoint_options o;
    o.listen = "127.0.0.1:0";
    port = endpoint::start(o).value()->port();
  }
  std::string address = "127.0.0.1:" + std::to_string(port);
  auto client = endpoint::start({}).value();
  auto r = wait_for<worker_status>([&](auto cb) { client->worker(address)->status(cb); });
  REQUIRE(!r.ok());
  CHECK(r.error().code() == error_code::unavailable);
  CHECK_THAT(r.error().message(), Catch::Contains(address));
  auto s = send_and_wait(*client, address, 1, "k", tensor::scalar<float>(1));
  CHECK(s.code() == error_code::unavailable);

  // A node knows its cluster: its errors name the task as well.
  endpoint_options named;
  named.task_names[address] = "/job:ps/replica:0/task:0";
  auto node = endpoint::start(named).value();
  auto sent = send_and_wait(*node, address, 1, "k", tensor::scalar<float>(1));
  CHECK(sent.code() == error_code::unavailable);
  CHECK_THAT(sent.message(), Catch::Contains("task /job:ps/replica:0/task:0 at " + address));
  auto called = wait_for<worker_status>([&](auto cb) { node->worker(address)->status(cb); });
  REQUIRE(!called.ok());
  CHECK_THAT(called.error().message(),
             Catch::Contains("task /job:ps/replica:0/task:0 at " + address));
}

TEST_CASE("tensors cross the data plane intact, in order, as bf16 when asked", "[net]") {
  received got;
  endpoint_options so;
  so.listen = "127.0.0.1:0";
  so.chunk_bytes = 1000; // exercise payloads written and read in pieces
  so.on_tensor = [&](int64_t step, std::string key, tensor t) { got.add(step, key, t); };
  auto server = endpoint::start(so).value();
  std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto client = endpoint::start({}).value();

  tensor big(dtype::f32, shape{300, 7}); // 8400 bytes: nine chunks
  for (int64_t i = 0; i < big.num_elements(); ++i)
    big.data<float>()[i] = float(i) * 0.5f - 100.f;
  auto ints = tensor::from_values<int64_t>(shape{3}, {1, -2, 1LL << 40});
  auto strings = tensor::from_values<std::string>(shape{3}, {"a", std::string("b\0c", 3), ""});
  tensor empty(dtype::f32, shape{0, 4});
  auto odd = tensor::from_values<float>(shape{3}, {1.0f + 1.0f / 1024, -3.14159f, 1e-30f});
  REQUIRE(send_and_wait(*client, address, 5, "big", big).ok());
  REQUIRE(send_and_wait(*client, address, 5, "ints", ints).ok());
  REQUIRE(send_and_wait(*client, address, 6, "strings", strings).ok());
  REQUIRE(send_and_wait(*client, address, 6, "empty", empty).ok());
  REQUIRE(send_and_wait(*client, address, 7, "odd", odd, {.bf16 = true}).ok());
  REQUIRE(got.wait(5));
  std::lock_guard lock(got.mu);
  CHECK(std::get<1>(got.items[0]) == "big");
  CHECK(std::get<0>(got.items[0]) == 5);
  auto& b = std::get<2>(got.items[0]);
  REQUIRE(b.shape() == big.shape());
  CHECK(std::memcmp(b.raw_data(), big.raw_data(), big.bytes()) == 0);
  CHECK(std::get<2>(got.items[1]).data<int64_t>()[2] == (1LL << 40));
  auto& s = std::get<2>(got.items[2]);
  REQUIRE(s.type() == dtype::string);
  CHECK(s.flat<std::string>()[1] == std::string("b\0c", 3));
  CHECK(std::get<2>(got.items[3]).shape() == shape{0, 4});
  // bf16 keeps the sign, the exponent and 7 bits of mantissa.
  auto& o = std::get<2>(got.items[4]);
  CHECK(o.data<float>()[0] == 1.0f);
  CHECK(std::abs(o.data<float>()[1] - -3.14159f) < 0.02f);
  CHECK(o.data<float>()[2] > 0);
  CHECK(server->stats().frames_received.load() == 5);
}

TEST_CASE("a node refuses a wrong token and survives garbage", "[net]") {
  fake_worker w;
  received got;
  endpoint_options so;
  so.listen = "127.0.0.1:0";
  so.worker = &w;
  so.auth_token = "s3cret";
  so.log = [](const std::string&) {}; // expected complaints
  so.on_tensor = [&](int64_t step, std::string key, tensor t) { got.add(step, key, t); };
  auto server = endpoint::start(so).value();
  std::string address = "127.0.0.1:" + std::to_string(server->port());

  endpoint_options wrong;
  wrong.auth_token = "guess";
  auto intruder = endpoint::start(wrong).value();
  auto r = wait_for<worker_status>([&](auto cb) { intruder->worker(address)->status(cb); });
  REQUIRE(!r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("auth token"));
  CHECK(send_and_wait(*intruder, address, 1, "k", tensor::scalar<float>(1)).code() ==
        error_code::unavailable);

  // Garbage: random bytes, an HTTP request, a valid preamble followed by a broken frame.
  CHECK(send_raw_bytes(address, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  std::string noise;
  for (int i = 0; i < 5000; ++i)
    noise += char((i * 7919) % 251);
  CHECK(send_raw_bytes(address, noise).ok());
  std::string pre = std::string("RUNNEL02") + char(2) + std::string(3, '\0');
  uint32_t n = 6;
  pre.append(reinterpret_cast<const char*>(&n), 4);
  pre += "s3cret";
  std::string frame(4, '\0');
  uint32_t len = 24;
  std::memcpy(frame.data(), &len, 4);
  frame += std::string(24, '\xff'); // not a Cap'n Proto message
  CHECK(send_raw_bytes(address, pre + frame).ok());
  uint32_t huge = 0xfffffff8u;
  std::string oversized(4, '\0');
  std::memcpy(oversized.data(), &huge, 4);
  CHECK(send_raw_bytes(address, pre + oversized).ok());

  // The node still serves the right peers.
  endpoint_options right;
  right.auth_token = "s3cret";
  auto friend_ep = endpoint::start(right).value();
  auto ok = wait_for<worker_status>([&](auto cb) { friend_ep->worker(address)->status(cb); });
  REQUIRE(ok.ok());
  CHECK(ok->incarnation == 42);
  REQUIRE(send_and_wait(*friend_ep, address, 3, "k", tensor::scalar<float>(2)).ok());
  REQUIRE(got.wait(1));
  CHECK(server->stats().connections_rejected.load() >= 3);
  CHECK(server->stats().frames_rejected.load() >= 2);
}
