// The limits the cluster benchmarks compare with, measured between real processes on loopback:
// raw TCP moving bytes, the data plane moving a tensor, a raw round trip; and the CPU time a
// process used (cluster_limits.hpp).
#include "cluster_limits.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runnel/net/endpoint.hpp"

namespace runnel::bench {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- raw TCP: the limit ------------------------------------------------------------------------

int listen_any(int& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(fd, 4);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  while (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

namespace {

bool read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r <= 0)
      return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r <= 0)
      return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

/// A child process connected to this one over loopback TCP (no delay): the child runs `body` on
/// its end, then exits; finish() closes this end and waits for it.
struct tcp_peer {
  pid_t child = -1;
  int fd = -1, listener = -1;
  void finish() {
    ::close(fd);
    ::close(listener);
    ::waitpid(child, nullptr, 0);
  }
};

tcp_peer start_tcp_peer(const std::function<void(int fd)>& body) {
  tcp_peer p;
  int port;
  p.listener = listen_any(port);
  p.child = ::fork();
  if (p.child == 0) {
    body(connect_to(port));
    _exit(0);
  }
  p.fd = ::accept(p.listener, nullptr, nullptr);
  int one = 1;
  ::setsockopt(p.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return p;
}

} // namespace

/// Best seconds to move `bytes` to a child process and get a 1-byte ack, raw TCP.
double raw_tcp(size_t bytes, int rounds) {
  tcp_peer peer = start_tcp_peer([&](int fd) {
    std::vector<char> buf(bytes);
    for (int r = 0; r < rounds; ++r) {
      if (!read_all(fd, buf.data(), bytes))
        _exit(1);
      char ack = 1;
      write_all(fd, &ack, 1);
    }
  });
  int fd = peer.fd;
  std::vector<char> data(bytes, 7);
  double best = 1e9;
  for (int r = 0; r < rounds; ++r) {
    double t0 = now();
    write_all(fd, data.data(), bytes);
    char ack;
    read_all(fd, &ack, 1);
    best = std::min(best, now() - t0);
  }
  peer.finish();
  return best;
}

/// Raw TCP moving `bytes` to a child process and `bytes` back (a ps's parameters out, their
/// gradients in): the median seconds of one exchange and the CPU seconds both processes spent on
/// it, each over `rounds` exchanges.
exchange_limit raw_exchange(size_t bytes, int rounds) {
  tcp_peer peer = start_tcp_peer([&](int fd) {
    std::vector<char> buf(bytes);
    for (int r = 0; r < rounds; ++r)
      if (!read_all(fd, buf.data(), bytes) || !write_all(fd, buf.data(), bytes))
        _exit(1);
  });
  int fd = peer.fd;
  std::vector<char> out(bytes, 7), in(bytes);
  std::vector<double> times;
  double cpu0 = cpu_seconds(0) + cpu_seconds(peer.child);
  for (int r = 0; r < rounds; ++r) {
    double t0 = now();
    write_all(fd, out.data(), bytes);
    read_all(fd, in.data(), bytes);
    times.push_back(now() - t0);
  }
  double cpu = cpu_seconds(0) + cpu_seconds(peer.child) - cpu0;
  peer.finish();
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], cpu / rounds};
}

// ---- the data plane ------------------------------------------------------------------------------

/// Sends `t` to `to`, again every 20 ms while the child there is still starting; when the send
/// that went through began.
double send_until_connected(net::endpoint& ep, const std::string& to, int64_t step,
                            const std::string& key, const tensor& t) {
  for (;;) {
    double t0 = now();
    std::promise<status> p;
    auto f = p.get_future();
    ep.send_tensor(to, step, key, t, {}, [&p](status s) { p.set_value(s); });
    if (f.get().ok())
      return t0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// Two free loopback addresses, for a parent's and a child's endpoint.
std::pair<std::string, std::string> two_loopback_addresses() {
  int parent_port, child_port;
  int a = listen_any(parent_port), b = listen_any(child_port);
  ::close(a);
  ::close(b);
  return {"127.0.0.1:" + std::to_string(parent_port), "127.0.0.1:" + std::to_string(child_port)};
}

/// Best seconds to send a 64 MiB tensor to a child process's endpoint and get its ack (a tiny
/// tensor sent back on the child's own data connection).
double data_plane(int rounds) {
  // Ports first, processes second: fork before any thread exists.
  auto [parent_addr, child_addr] = two_loopback_addresses();
  pid_t child = ::fork();
  if (child == 0) {
    std::mutex mu;
    std::condition_variable cv;
    int got = 0;
    net::endpoint_options o;
    o.listen = child_addr;
    o.on_tensor = [&](int64_t, std::string, tensor t) {
      std::lock_guard lock(mu);
      got += t.bytes() == tensor_bytes;
      cv.notify_all();
    };
    auto ep = net::endpoint::start(o).value();
    for (int r = 0; r < rounds; ++r) {
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return got > r; });
      }
      ep->send_tensor(parent_addr, r, "ack", tensor::scalar<float>(1), {}, [](status) {});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    _exit(0);
  }
  std::mutex mu;
  std::condition_variable cv;
  int acks = 0;
  net::endpoint_options o;
  o.listen = parent_addr;
  o.on_tensor = [&](int64_t, std::string, tensor) {
    std::lock_guard lock(mu);
    ++acks;
    cv.notify_all();
  };
  auto ep = net::endpoint::start(o).value();
  tensor t(dtype::f32, shape{int64_t(tensor_bytes / 4)});
  std::memset(t.raw_data(), 1, t.bytes());
  double best = 1e9;
  for (int r = 0; r < rounds; ++r) {
    double t0 = send_until_connected(*ep, child_addr, r, "t", t);
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return acks > r; });
    best = std::min(best, now() - t0);
  }
  ep.reset();
  ::waitpid(child, nullptr, 0);
  return best;
}

/// Median seconds to send a tensor of `bytes` to a child process's endpoint and receive one of
/// the same size back (the tensor it received, sent on), as ps_training's parameters and
/// gradients cross; `direct`: endpoint_options::direct_sends in both.
double data_plane_exchange(size_t bytes, int rounds, bool direct) {
  auto [parent_addr, child_addr] = two_loopback_addresses();
  struct inbox {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<tensor> got;
    tensor take() {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return !got.empty(); });
      tensor t = std::move(got.front());
      got.pop_front();
      return t;
    }
  };
  auto start = [&](const std::string& listen, inbox& in) {
    net::endpoint_options o;
    o.listen = listen;
    o.direct_sends = direct;
    o.on_tensor = [&in](int64_t, std::string, tensor t) {
      std::lock_guard lock(in.mu);
      in.got.push_back(std::move(t));
      in.cv.notify_all();
    };
    return net::endpoint::start(o).value();
  };
  pid_t child = ::fork();
  if (child == 0) {
    inbox in;
    auto ep = start(child_addr, in);
    for (int r = 0; r < rounds; ++r)
      ep->send_tensor(parent_addr, r, "back", in.take(), {}, [](status) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    _exit(0);
  }
  inbox in;
  auto ep = start(parent_addr, in);
  tensor t(dtype::f32, shape{int64_t(bytes / 4)});
  std::memset(t.raw_data(), 1, t.bytes());
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    double t0 = send_until_connected(*ep, child_addr, r, "out", t);
    in.take();
    times.push_back(now() - t0);
  }
  ep.reset();
  ::waitpid(child, nullptr, 0);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Median seconds of a raw TCP round trip of 8 bytes to a child process.
double raw_round_trip(int rounds) {
  tcp_peer peer = start_tcp_peer([&](int fd) {
    char b[8];
    for (int r = 0; r < rounds; ++r) {
      if (!read_all(fd, b, 8))
        _exit(1);
      write_all(fd, b, 8);
    }
  });
  int fd = peer.fd;
  std::vector<double> times;
  char b[8] = {};
  for (int r = 0; r < rounds; ++r) {
    double t0 = now();
    write_all(fd, b, 8);
    read_all(fd, b, 8);
    times.push_back(now() - t0);
  }
  peer.finish();
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// CPU seconds (user + system) a process used so far (0: this one).
double cpu_seconds(pid_t pid) {
  std::string path = pid ? "/proc/" + std::to_string(pid) + "/stat" : "/proc/self/stat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f)
    return 0;
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')') + 2;
  unsigned long long utime = 0, stime = 0;
  int field = 3;
  while (field < 14) { // utime and stime are fields 14 and 15
    p = std::strchr(p, ' ') + 1;
    ++field;
  }
  std::sscanf(p, "%llu %llu", &utime, &stime);
  return double(utime + stime) / double(sysconf(_SC_CLK_TCK));
}

} // namespace runnel::bench
