#pragma once
// A process's network endpoint: the control plane (Cap'n Proto RPC) and the tensor data plane,
// served and used from one event-loop thread. kj and capnp stay inside net/.
//
//   net::endpoint_options o;
//   o.listen = "127.0.0.1:2222";            // "" for a client that serves nothing
//   o.worker = &my_worker;                  // what this node serves (may be null)
//   o.on_tensor = [&](int64_t step, std::string key, tensor t) { rendezvous.send(...); };
//   auto ep = net::endpoint::start(std::move(o)).value();
//   auto w = ep->worker("127.0.0.1:2223");  // a remote worker; calls from any thread
//   w->status([](result<net::worker_status> s) { ... });
//   ep->send_tensor("127.0.0.1:2223", step, key, t, {}, [](status s) { ... });
//
// Every connection starts with a preamble (net/wire_frame.hpp): "RUNNEL" and the wire version as
// two digits ("RUNNEL02"), one byte for its kind (1: RPC, 2: data, 3: step calls, 4: data with a
// shared-memory ring offered in 16 more bytes after the token), three zero bytes, a little-endian
// uint32 token length (at most 4096), and the token. The server answers one byte: 0 accepted (for
// kind 4 then one more, 1 if it mapped the ring), 1 bad token, 2 bad preamble, 3 busy (the peer's
// host is at its connection limit), 4 another wire version (then one more byte: its own), then
// closes the connection unless it accepted. The handshake must finish within
// `handshake_timeout`; an accepted connection that moves no byte for `idle_timeout` with no call
// in flight is closed (peers reconnect on their next call). docs/reliability.md has the security
// model. An RPC connection then carries Cap'n Proto RPC (net/cluster.capnp, bootstrap `Node`); a
// data connection carries tensor frames one way (see TensorFrame), and frames of one connection
// arrive in order; a step connection carries step calls and their replies (StepMessage), off the
// event loop (net/step_plane.hpp). Malformed input closes the connection and is logged; it never
// stops the node.
//
// Callbacks (service calls, replies, received tensors) run on the endpoint's thread: they must
// not block. Services answer through their `done` callbacks, from any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runnel/net/cluster_spec.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel::net {

template <class T> using callback = std::function<void(result<T>)>;
using named_tensors = std::vector<std::pair<std::string, tensor>>;

/// One node's run in a traced call (run_options::trace), on the steady clock of the process that
/// ran it (ns since that clock's epoch).
struct traced_node {
  std::string node, op, device;
  int64_t start_ns = 0, end_ns = 0, output_bytes = 0;
};

/// What a traced call reports besides its value: the nodes it ran, and when the serving process
/// got the call and answered it, on that process's steady clock; the caller aligns the two
/// clocks from these and its own send and receive times (align_trace).
struct call_trace {
  std::vector<traced_node> nodes;
  int64_t received_ns = 0, replied_ns = 0;
};

template <class T> struct traced {
  T value;
  call_trace trace;
};

/// A traced call's `done`, for a reply without a trace (no nodes).
template <class T> std::function<void(result<T>)> with_empty_trace(callback<traced<T>> done) {
  return [done = std::move(done)](result<T> r) {
    if (!r)
      done(r.error());
    else
      done(traced<T>{std::move(r).value(), {}});
  };
}

/// An untraced call's `done`, for a reply with a trace (dropped).
template <class T> std::function<void(result<traced<T>>)> without_trace(callback<T> done) {
  return [done = std::move(done)](result<traced<T>> r) {
    if (!r)
      done(r.error());
    else
      done(std::move(r->value));
  };
}

/// This process's steady clock, in ns since its epoch (what traces carry).
int64_t steady_ns();

/// Moves `from`'s nodes into `into`, shifted from the serving process's clock to the caller's:
/// the offset between the two is estimated as NTP does, from the call's send and receive times on
/// the caller's clock (`sent_ns`, `got_ns`) and the served stamps in `from`, assuming the request
/// and the reply took equally long; its error is at most half the round trip less the time
/// served.
void align_trace(call_trace& from, int64_t sent_ns, int64_t got_ns, std::vector<traced_node>& into);

struct device_info {
  std::string name;
  std::string type = "CPU";
  int64_t memory_bytes = 0;
  double flops_per_s = 0;
  double bytes_per_s = 0;
};

struct worker_status {
  task_id task;
  uint64_t incarnation = 0;
  std::vector<device_info> devices;
  std::string cluster;
};

/// What a node serves as a worker (actors/ implements it).
class worker_service {
public:
  virtual ~worker_service() = default;
  virtual worker_status status() = 0;
  virtual void register_graph(std::string graph_bytes, callback<std::string> done) = 0;
  virtual void run_graph(const std::string& handle, int64_t step_id, named_tensors feeds,
                         std::vector<std::string> fetches, callback<named_tensors> done) = 0;
  /// As run_graph, recording the partition's node times (default: untraced, no nodes).
  virtual void run_graph_traced(const std::string& handle, int64_t step_id, named_tensors feeds,
                                std::vector<std::string> fetches,
                                callback<traced<named_tensors>> done);
  virtual void cleanup_step(int64_t step_id) = 0;
  virtual void deregister_graph(const std::string& handle) = 0;
};

/// What a node serves as a master (actors/ implements it).
class master_service {
public:
  virtual ~master_service() = default;
  virtual void create_session(std::string graph_bytes, bool cost_model,
                              callback<std::string> done) = 0;
  virtual void extend_session(const std::string& handle, std::string graph_bytes,
                              std::function<void(status)> done) = 0;
  virtual void run(const std::string& handle, named_tensors feeds,
                   std::vector<std::string> fetches, std::vector<std::string> targets,
                   callback<std::vector<tensor>> done) = 0;
  /// As run, recording every task's node times on this master's clock (default: untraced).
  virtual void run_traced(const std::string& handle, named_tensors feeds,
                          std::vector<std::string> fetches, std::vector<std::string> targets,
                          callback<traced<std::vector<tensor>>> done);
  virtual void close_session(const std::string& handle) = 0;
  /// Fails the session's steps in flight with `cancelled`; every task cleans them up. `done`
  /// runs once they are failed (a step run after it is not cancelled).
  virtual void cancel_steps(const std::string& handle, std::function<void(status)> done) = 0;
};

/// A worker elsewhere. Thread-safe; each reply comes once, on the endpoint's thread. A lost
/// connection fails pending and later calls with `unavailable` naming the address (the next
/// call after a failure reconnects).
class remote_worker {
public:
  virtual ~remote_worker() = default;
  virtual const std::string& address() const = 0;
  virtual void status(callback<worker_status> done) = 0;
  virtual void register_graph(std::string graph_bytes, callback<std::string> done) = 0;
  virtual void run_graph(const std::string& handle, int64_t step_id, named_tensors feeds,
                         std::vector<std::string> fetches, callback<named_tensors> done) = 0;
  /// As run_graph, with the worker's node times (default: untraced, no nodes).
  virtual void run_graph_traced(const std::string& handle, int64_t step_id, named_tensors feeds,
                                std::vector<std::string> fetches,
                                callback<traced<named_tensors>> done);
  virtual void cleanup_step(int64_t step_id) = 0;
  virtual void deregister_graph(const std::string& handle) = 0;
  /// A sign of life: `done` runs with ok once the worker's process answers (default: a status
  /// call; on step connections, a heartbeat message answered by the thread reading them).
  virtual void heartbeat(std::function<void(runnel::status)> done);
};

/// A master elsewhere (a node's), for remote sessions.
class remote_master : public master_service {
public:
  /// The master's address (its calls are master_service's).
  virtual const std::string& address() const = 0;
};

struct send_options {
  /// Send a float32 tensor as bfloat16 (the low 16 bits of each mantissa dropped).
  bool bf16 = false;
  /// Frames to one peer that wait for the connection go out lowest priority first (equal ones in
  /// the order sent): a step's tensors leave in the order the receiver needs them.
  int64_t priority = 0;
};

/// Counters of what an endpoint did, refused or failed (for logs, tests and --metrics).
struct endpoint_stats {
  std::atomic<uint64_t> connections_accepted{0};
  std::atomic<uint64_t> connections_rejected{0}; ///< bad preamble or token
  std::atomic<uint64_t> connections_refused_busy{0}; ///< over a connection limit
  std::atomic<uint64_t> handshake_timeouts{0};
  std::atomic<uint64_t> idle_closed{0};          ///< closed after idle_timeout
  std::atomic<uint64_t> accept_errors{0};        ///< accept() failed (e.g. out of descriptors)
  std::atomic<uint64_t> rpcs_refused{0};         ///< over max_pending_rpcs
  std::atomic<uint64_t> frames_received{0};
  std::atomic<uint64_t> frames_rejected{0};      ///< malformed or oversized
  std::atomic<uint64_t> frames_received_shm{0};  ///< of frames_received, through shared memory
  std::atomic<uint64_t> frames_lent_shm{0};      ///< of those, viewed in place (not copied)
  std::atomic<uint64_t> frames_sent{0};          ///< data-plane frames written
  std::atomic<uint64_t> frames_sent_shm{0};      ///< of those, their payload by shared memory
  /// Of those on the socket, payloads large enough for the ring that found it without room.
  std::atomic<uint64_t> frames_shm_full{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<int64_t> connections_open{0};      ///< accepted and past the handshake
};

struct peer_traffic {
  uint64_t bytes_received = 0;
  uint64_t bytes_sent = 0;
};

struct endpoint_options {
  /// "host:port" to serve on (port 0: any free port, see endpoint::port); empty: serve nothing.
  std::string listen;
  /// A shared secret peers must present (and this endpoint presents); empty: none, which a
  /// listener refuses unless it is on a loopback address or `allow_unauthenticated` is set.
  std::string auth_token;
  bool allow_unauthenticated = false;
  worker_service* worker = nullptr;
  master_service* master = nullptr;
  /// Where received tensors go; errors are frames that failed their checks (already logged).
  std::function<void(int64_t step, std::string key, tensor value)> on_tensor;
  /// Sent with every tensor frame: tells a restarted sender from the old one.
  uint64_t incarnation = 0;
  /// The largest tensor payload accepted, and the largest RPC message.
  uint64_t max_payload_bytes = uint64_t(16) << 30;
  uint64_t max_rpc_message_bytes = uint64_t(2) << 30;
  /// Logs a line (malformed input, connections lost); default: stderr.
  std::function<void(const std::string&)> log;
  /// Payloads larger than this are written in pieces of this size (Cap'n Proto's Data cap).
  uint64_t chunk_bytes = uint64_t(512) << 20;
  /// Connecting plus the handshake, as a client.
  std::chrono::milliseconds connect_timeout{5000};
  /// How long an accepted connection may take to present its preamble and token.
  std::chrono::milliseconds handshake_timeout{5000};
  /// An accepted connection that moves no byte this long, with no call in flight, is closed;
  /// 0: never.
  std::chrono::milliseconds idle_timeout{300'000};
  /// Handshakes in progress at once (beyond them, new connections are closed at once), and
  /// connections past the handshake per peer host.
  int max_handshakes = 512;
  int max_connections_per_peer = 64;
  /// RPC calls in flight per connection; more are answered `resource_exhausted`.
  int max_pending_rpcs = 1024;
  /// TLS for both planes, all three or none (PEM files): this endpoint's certificate and key
  /// (presented as a server and as a client) and the CA that signs every peer's certificate.
  /// Peers must present a certificate that CA signed (mutual TLS); a client checks that the
  /// server's certificate names the host it dialled (for an IP, as a DNS name too).
  std::string tls_cert, tls_key, tls_ca;
  /// Traffic classes: the IP TOS byte of the data-plane connections this endpoint opens (the
  /// tensors it sends), and of its calls and everything its accepted connections send (replies,
  /// acks); -1: the system's default. Links whose queues honour the byte (a switch's DSCP
  /// queues, the simulated hosts of scripts/lib/netns.sh) let one class pass another.
  int data_tos = -1;
  int rpc_tos = -1;
  /// Step calls (runGraph, step cleanup, heartbeats, a master's run) on connections of their own,
  /// written by the calling thread and read by a thread per connection (docs/cluster.md, "Step
  /// calls"); false, or RUNNEL_STEP_CALLS=0 in the environment: as Cap'n Proto RPC calls through
  /// the event loop. With TLS, step calls always go as RPC calls.
  bool step_calls = true;
  /// Shared memory for tensors to a peer on a loopback address (docs/cluster.md, "Shared memory
  /// on one host"): each such data connection offers a ring of this many bytes, and payloads of
  /// at least `shm_min_payload_bytes` (at most a quarter of the ring) go through it while it has
  /// room. 0, TLS, or RUNNEL_SHM=0 in the environment: every payload goes on the socket.
  uint64_t shm_ring_bytes = uint64_t(32) << 20;
  uint64_t shm_min_payload_bytes = uint64_t(64) << 10;
  /// A floating-point payload that arrives through the ring becomes a tensor viewing it in place
  /// (its bytes reused once the tensor goes) instead of a copy; false, or RUNNEL_SHM_LEND=0 in
  /// the environment: every payload is copied out.
  bool shm_lend = true;
  /// Frames to a peer on this host (up to a quarter of the ring) are written by the thread that
  /// sends them, on the peer's data connection, blocking, instead of by the event loop (one
  /// wake-up and one hop less a tensor: docs/cluster.md); false, or RUNNEL_DIRECT_SENDS=0 in the
  /// environment: the loop writes every frame.
  bool direct_sends = true;
  /// Frames with larger payloads are read into buffers that grow with the bytes that arrived,
  /// so that a header cannot reserve memory its sender never fills.
  uint64_t direct_payload_bytes = uint64_t(64) << 20;
  /// The cluster's tasks by address ("127.0.0.1:2223" -> "/job:worker/replica:0/task:0"): errors
  /// about a peer name its task as well as its address. Empty: the address alone.
  std::map<std::string, std::string> task_names;
};

/// "task /job:worker/replica:0/task:1 at 127.0.0.1:2224", or "task at ADDRESS" for an address
/// `task_names` does not know.
std::string describe_peer(const endpoint_options& options, const std::string& address);

class endpoint {
public:
  /// Starts the event-loop thread and, with `listen`, binds (an error names the address).
  static result<std::unique_ptr<endpoint>> start(endpoint_options options);
  /// Stops serving, fails pending calls with `cancelled`, joins the thread.
  ~endpoint();
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;

  /// The bound port (after `listen` with port 0, the one the system chose).
  int port() const;
  /// Whether it listens on a loopback address only.
  bool loopback_only() const;
  /// A handle to the worker at `address`; connects on first use.
  std::shared_ptr<remote_worker> worker(const std::string& address);
  std::shared_ptr<remote_master> master(const std::string& address);
  /// Sends a tensor to the endpoint at `address` under (step, key) without copying it; `done`
  /// runs once it is written (or failed: `unavailable` naming the address): on the event loop,
  /// or before this returns when this thread wrote it (`endpoint_options::direct_sends`).
  void send_tensor(const std::string& address, int64_t step, const std::string& key,
                   tensor value, send_options options, std::function<void(status)> done);
  /// Drops the connections to `address` (a task that failed or restarted): later calls and
  /// tensors open fresh ones.
  void forget_peer(const std::string& address);
  const endpoint_stats& stats() const;
  /// Data-plane bytes by peer (received: by the sending host; sent: by the receiving address).
  std::map<std::string, peer_traffic> traffic_by_peer() const;

  struct impl;

private:
  explicit endpoint(std::shared_ptr<impl> i);
  std::shared_ptr<impl> impl_; // remote handles share it: they outlive the loop safely
};

/// Sends raw bytes to `address` and closes (for tests of malformed input).
status send_raw_bytes(const std::string& address, const std::string& bytes);

} // namespace runnel::net
