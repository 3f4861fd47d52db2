#pragma once
// The limits the cluster benchmarks compare with (cluster_limits.cpp). Each forks its peer
// process: call them before any thread exists, or from code whose child only execs or spins.
#include <sys/types.h>

#include <cstddef>

namespace runnel::bench {

constexpr size_t tensor_bytes = size_t(64) << 20;
constexpr int reps = 8;

/// Seconds on the steady clock.
double now();
/// A loopback listener on a free port (written to `port`), and a connection to one.
int listen_any(int& port);
int connect_to(int port);
/// Best seconds to move `bytes` to a child process and get a 1-byte ack, raw TCP.
double raw_tcp(size_t bytes, int rounds);
struct exchange_limit {
  double seconds;     ///< median wall time of one exchange
  double cpu_seconds; ///< CPU time of both processes per exchange
};
/// Raw TCP moving `bytes` to a child process and `bytes` back (parameters out, gradients in).
exchange_limit raw_exchange(size_t bytes, int rounds);
/// Best seconds to send a 64 MiB tensor to a child process's endpoint and get its ack.
double data_plane(int rounds);
/// Median seconds to send `bytes` to a child process's endpoint and receive as many back;
/// `direct`: endpoint_options::direct_sends.
double data_plane_exchange(size_t bytes, int rounds, bool direct);
/// Median seconds of a raw TCP round trip of 8 bytes to a child process.
double raw_round_trip(int rounds);
/// CPU seconds (user + system) a process used so far (0: this one).
double cpu_seconds(pid_t pid);

} // namespace runnel::bench
