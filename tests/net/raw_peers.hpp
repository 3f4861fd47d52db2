#pragma once
// Peers for the network tests: a raw TCP client that writes bytes and reads until the server
// closes, a worker service that holds every run_graph until told, a server's options that log
// only when HT_LOG is set, what a data plane received, and a send and a call that wait.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "runnel/net/endpoint.hpp"

namespace runnel::testing {

using namespace runnel::net;

/// A plain blocking TCP client: holds a connection open, writes bytes, reads until the server
/// closes (with a 20 s safety net, so a broken server fails the test instead of hanging it).
class raw_conn {
public:
  explicit raw_conn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    timeval tv{20, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~raw_conn() { ::close(fd_); }
  void send(const std::string& bytes) {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size()));
  }
  /// The next byte, or -1 when the server closed the connection.
  int read_byte() {
    unsigned char c;
    ssize_t n = ::recv(fd_, &c, 1, 0);
    if (n < 0 && errno == ECONNRESET)
      return -1;     // closed with our bytes unread: the kernel resets instead of FIN
    REQUIRE(n >= 0); // < 0 otherwise: the 20 s safety net ran out
    return n == 0 ? -1 : c;
  }
  /// Reads until the server closes; the bytes read before.
  std::string read_to_close() {
    std::string out;
    for (int c; (c = read_byte()) >= 0;)
      out += char(c);
    return out;
  }

private:
  int fd_ = -1;
};

class never_answering_worker : public worker_service {
public:
  worker_status status() override { return {{"worker", 0}, 7, {}, ""}; }
  void register_graph(std::string, callback<std::string> done) override { done(std::string("h")); }
  void run_graph(const std::string&, int64_t, named_tensors, std::vector<std::string>,
                 callback<named_tensors> done) override {
    std::lock_guard lock(mu);
    held.push_back(std::move(done)); // answered at the end of the test
  }
  void cleanup_step(int64_t) override {}
  void deregister_graph(const std::string&) override {}
  void answer_all() {
    std::vector<callback<named_tensors>> h;
    {
      std::lock_guard lock(mu);
      h.swap(held);
    }
    for (auto& d : h)
      d(named_tensors{});
  }
  std::mutex mu;
  std::vector<callback<named_tensors>> held;
};

inline endpoint_options quiet_server() {
  endpoint_options o;
  o.listen = "127.0.0.1:0";
  o.log = [](const std::string& l) {
    if (std::getenv("HT_LOG"))
      std::fprintf(stderr, "%s\n", l.c_str());
  };
  return o;
}

struct received {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::tuple<int64_t, std::string, tensor>> items;
  void add(int64_t step, std::string key, tensor t) {
    std::lock_guard lock(mu);
    items.emplace_back(step, std::move(key), std::move(t));
    cv.notify_all();
  }
  bool wait(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(20), [&] { return items.size() >= n; });
  }
};

/// Makes a call and waits (at most 20 s) for its answer.
template <class T> result<T> wait_for(std::function<void(callback<T>)> call) {
  auto p = std::make_shared<std::promise<result<T>>>();
  auto f = p->get_future();
  call([p](result<T> r) { p->set_value(std::move(r)); });
  REQUIRE(f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  return f.get();
}

inline status send_and_wait(endpoint& ep, const std::string& address, int64_t step,
                            const std::string& key, tensor t, send_options o = {}) {
  std::promise<status> p;
  auto f = p.get_future();
  ep.send_tensor(address, step, key, std::move(t), o, [&p](status s) { p.set_value(s); });
  REQUIRE(f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  return f.get();
}

} // namespace runnel::testing
