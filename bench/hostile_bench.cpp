// hostile_connections: a trivial step through a runnel-node (client -> master -> worker ->
// back), median µs, while 1,000 connections attack the node: idle ones that never send their
// preamble, slow ones that dribble it a byte at a time, and garbage (random bytes, reconnecting
// as the node closes them). Reported against the median of the same steps with no attack, in
// the same run; target: at most 2x (docs/reliability.md).
//   hostile_bench [RUNNEL_NODE_BINARY]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/graph/builder.hpp"

using namespace runnel;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// A non-blocking connection to the node (-1 when the connect fails at once).
int attack_socket(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Keeps `n` attacking connections open until `stop`: a third idle, a third dribbling the
/// preamble a byte per round, a third sending garbage; any the node closes is opened again.
void attack(int port, int n, std::atomic<bool>& stop, std::atomic<long>& reopened) {
  struct conn {
    int fd = -1;
    int kind = 0; // 0 idle, 1 slow, 2 garbage
    size_t sent = 0;
  };
  std::vector<conn> conns(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    conns[size_t(i)] = {attack_socket(port), i % 3, 0};
  std::mt19937 rng(7);
  std::string garbage(1024, '\0');
  const std::string preamble = std::string("RUNNEL02") + char(1) + std::string(7, '\0');
  while (!stop) {
    for (auto& c : conns) {
      char buf[64];
      bool closed = c.fd < 0;
      if (!closed) {
        ssize_t r = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
        closed = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                            errno != ENOTCONN && errno != EINPROGRESS);
      }
      if (closed) {
        if (c.fd >= 0)
          ::close(c.fd);
        c.fd = attack_socket(port);
        c.sent = 0;
        reopened++;
        continue;
      }
      if (c.kind == 1 && c.sent < preamble.size() - 1) {
        if (::send(c.fd, preamble.data() + c.sent, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
          c.sent++;
      } else if (c.kind == 2) {
        for (auto& ch : garbage)
          ch = char(rng());
        ::send(c.fd, garbage.data(), garbage.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); // the attackers' pace
  }
  for (auto& c : conns)
    if (c.fd >= 0)
      ::close(c.fd);
}

double median_step(session& s, const feed_list& feeds, output y, int rounds) {
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    double t0 = now();
    throw_if_error(s.run(feeds, {y}).error());
    times.push_back(now() - t0);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  std::string node_binary = argc > 1 ? argv[1] : RUNNEL_NODE_BINARY;
  ::signal(SIGPIPE, SIG_IGN);
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max; // 1,000 attacking sockets in this process
  ::setrlimit(RLIMIT_NOFILE, &lim);
  int port = free_port();
  std::string address = "127.0.0.1:" + std::to_string(port);
  std::string cluster = "worker=" + address;
  pid_t child = ::fork();
  if (child == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 2); // the node logs every refusal: not this benchmark's output
    ::execl(node_binary.c_str(), node_binary.c_str(), "--cluster", cluster.c_str(), "--job",
            "worker", "--task", "0", static_cast<char*>(nullptr));
    _exit(127);
  }
  auto* rt = new runtime; // never destroyed: see tests/eval.hpp
  graph g;
  auto x = placeholder(g, dtype::f32, {}, "x");
  auto y = x + 1.0;
  session s(*rt, g, "runnel://" + address);
  feed_list feeds{{x, tensor::scalar<float>(1)}};
  for (int i = 0; i < 500; ++i) { // wait for the node to listen
    if (s.run(feeds, {y}).ok())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int i = 0; i < 200; ++i)
    throw_if_error(s.run(feeds, {y}).error());
  double calm = median_step(s, feeds, y, 2000);
  std::atomic<bool> stop{false};
  std::atomic<long> reopened{0};
  std::thread attacker([&] { attack(port, 1000, stop, reopened); });
  std::this_thread::sleep_for(std::chrono::seconds(2)); // let the attack build up
  double attacked = median_step(s, feeds, y, 2000);
  double slowest = 0;
  for (int i = 0; i < 200; ++i) { // and the tail: the slowest of 200 more
    double a = now();
    throw_if_error(s.run(feeds, {y}).error());
    slowest = std::max(slowest, now() - a);
  }
  stop = true;
  attacker.join();
  s.close();
  ::kill(child, SIGTERM);
  ::waitpid(child, nullptr, 0);
  std::printf("bench hostile_connections: %.3g us median step under 1000 idle, slow and garbage "
              "connections (%.2fx the %.3g us with none; target 2x); slowest of 200: %.3g ms; "
              "%ld attacking connections reopened after the node closed them\n",
              attacked * 1e6, attacked / calm, calm * 1e6, slowest * 1e3, reopened.load());
  return 0;
}
