#pragma once
// Cluster nodes: a runtime serving as one task of a cluster (a worker service for the partitions
// masters register, and a master service for remote sessions), over net/'s endpoint.
//
//   auto spec = cluster_spec::parse("ps=127.0.0.1:2222;worker=127.0.0.1:2223").value();
//   auto node = cluster_node::start({.cluster = spec, .job = "ps", .task = 0}).value();
//   ...                                        // serves until destroyed
//
// A client elsewhere opens `session(rt, g, "runnel://127.0.0.1:2223")`: the node's master places
// the graph over every task's devices, registers one partition per task with the task's worker,
// and runs steps; tensors between tasks travel on the data plane (docs/cluster.md).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runnel/actors/exec/runtime.hpp"
#include "runnel/net/cluster_spec.hpp"

namespace runnel {

struct node_options {
  cluster_spec cluster;
  std::string job;
  int task = 0;
  /// Where to listen; default: this task's address in the cluster spec.
  std::string listen;
  /// A shared secret every peer must present (empty: none, which is refused on an address other
  /// hosts can reach unless `allow_unauthenticated`; docs/reliability.md).
  std::string auth_token;
  bool allow_unauthenticated = false;
  /// TLS for both planes (net::endpoint_options): PEM files, all three or none.
  std::string tls_cert, tls_key, tls_ca;
  /// "host:port" to serve Prometheus metrics on (GET /metrics); empty: none.
  std::string metrics;
  /// Accepted connections that move no byte this long are closed (0: never); a handshake must
  /// finish within `handshake_timeout`.
  std::chrono::milliseconds idle_timeout{300'000};
  std::chrono::milliseconds handshake_timeout{5000};
  /// Marks this task's traffic by what waits for it (net::endpoint_options, DSCP in the IP TOS
  /// byte): calls, their replies and acks EF (46); a "ps" task's tensors AF41 (34): parameters,
  /// which every worker's forward pass waits for; other tasks' tensors CS1 (8, lower effort):
  /// gradients and the like, wanted only by the step's end. Links that honour the marks let
  /// parameters pass gradients, so a worker that falls behind is not held up further by the
  /// others' gradients arriving on its host (docs/scaling.md, "Traffic classes"); others
  /// ignore them. false: no marks.
  bool traffic_classes = true;
  int cpu_devices = 1;
  /// GPUs made of host memory (runtime_options::simulated_gpus; docs/gpu.md).
  int simulated_gpus = 0;
  /// How long a master waits for the cluster's tasks when a session is created.
  std::chrono::milliseconds startup_timeout{10000};
  /// How long a task of a running step may leave a heartbeat unanswered before the step fails
  /// naming it (0: no heartbeats).
  std::chrono::milliseconds heartbeat_timeout{30000};
  /// Log lines (level, message); default: key=value lines on stderr.
  std::function<void(const std::string& level, const std::string& message)> log;
};

class cluster_node {
public:
  /// Starts the runtime and serves; errors name the job, task and address.
  static result<std::unique_ptr<cluster_node>> start(node_options options);
  /// Stops serving: steps still waiting on other tasks are cancelled.
  ~cluster_node();
  cluster_node(const cluster_node&) = delete;
  cluster_node& operator=(const cluster_node&) = delete;

  runtime& rt();
  /// The port it listens on.
  int port() const;
  /// The port metrics are served on (0: none).
  int metrics_port() const;
  /// Random per start: tells a restarted task from its predecessor.
  uint64_t incarnation() const;
  /// Bytes and frames through this node's endpoint so far.
  uint64_t bytes_sent() const;
  uint64_t bytes_received() const;
  /// Data-plane frames sent so far: all, those whose payload went through a peer's shared-memory
  /// ring, and those large enough for it that found the ring full (they took the socket).
  struct frame_counts {
    uint64_t sent = 0, by_shared_memory = 0, ring_full = 0;
  };
  frame_counts frames_sent() const;
  /// Connections accepted so far (sessions of this process that call its master directly make
  /// none).
  uint64_t connections_accepted() const;
  const node_options& options() const;

  struct impl;

private:
  explicit cluster_node(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

/// The default log sink: `ts=... level=... msg="..."` lines on stderr.
void log_line(const std::string& level, const std::string& message);

} // namespace runnel
