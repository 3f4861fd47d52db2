#pragma once
// The endpoint's insides, shared by endpoint.cpp (the loop thread and the client side),
// endpoint_serve.cpp (accepting, handshakes, limits, the data plane's receiving side and the RPC
// services) and remote_handles.cpp. Private to net/: kj and capnp stay here.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>

#include <capnp/message.h>
#include <capnp/rpc-twoparty.h>
#include <capnp/serialize.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <kj/compat/tls.h>
#include <kj/debug.h>

#include "net/cluster.capnp.h"
#include "runnel/net/endpoint.hpp"
#include "runnel/net/shm_ring.hpp"
#include "runnel/net/tensor_codec.hpp"
#include "runnel/net/wire_frame.hpp"

namespace runnel::net {
class step_plane;
namespace detail {

constexpr auto connect_timeout = 5 * kj::SECONDS;

inline std::string to_std(kj::StringPtr s) {
  return std::string(s.cStr(), s.size());
}
inline std::string to_std(capnp::Data::Reader d) {
  return std::string(reinterpret_cast<const char*>(d.begin()), d.size());
}
inline kj::ArrayPtr<const kj::byte> bytes_of(const std::string& s) {
  return kj::arrayPtr(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}
/// Marks what `s` sends with the IP TOS byte `tos` (endpoint_options::data_tos, rpc_tos); -1 or
/// a stream that is not an IPv4 socket: nothing (best effort).
inline void set_traffic_class(kj::AsyncIoStream& s, int tos) {
  if (tos >= 0)
    kj::runCatchingExceptions([&]() { s.setsockopt(IPPROTO_IP, IP_TOS, &tos, sizeof tos); });
}

inline kj::Duration to_kj(std::chrono::milliseconds d) {
  return d.count() * kj::MILLISECONDS;
}

/// A blocking copy of a connected stream's socket (TCP_NODELAY set), for a step connection; -1
/// when the stream has none (TLS).
int take_socket(kj::AsyncIoStream& s);
/// The header of a frame carrying `value`, and where its payload lies (`payload`; null for a
/// string tensor, whose values travel in the header). With `o.bf16`, a float32 payload is
/// truncated into `bf16`, which `payload` then points into.
frame_header frame_header_of(int64_t step, const std::string& key, uint64_t incarnation,
                             const tensor& value, const send_options& o,
                             std::vector<uint16_t>& bf16, const void*& payload);
/// Whether `address` names this host (a loopback address): where shared memory may carry payloads.
bool on_this_host(const std::string& address);
/// A kj exception as a status naming the peer.
status from_exception(const kj::Exception& e, const std::string& peer);
void write_status(wire::Status::Builder b, const status& s);
status read_status(wire::Status::Reader r);
void write_named(capnp::List<wire::NamedTensor>::Builder list, const named_tensors& ts);
result<named_tensors> read_named(capnp::List<wire::NamedTensor>::Reader list);
std::vector<std::string> read_texts(capnp::List<capnp::Text>::Reader list);
worker_status read_worker_status(wire::WorkerStatus::Reader r);
void write_trace(wire::CallTrace::Builder b, const call_trace& t);
call_trace read_trace(wire::CallTrace::Reader r);

/// Calls `done` exactly once: with the result, or with `cancelled` if the call is dropped first
/// (the endpoint shut down): the last owner's release answers for it.
template <class T> struct once {
  explicit once(std::function<void(T)> d) : done(std::move(d)) {}
  once(const once&) = delete;
  ~once() {
    if (!called && done)
      done(T(cancelled("the network endpoint shut down")));
  }
  std::function<void(T)> done;
  bool called = false;
  void operator()(T v) {
    if (!called) {
      called = true;
      done(std::move(v));
    }
  }
};

} // namespace detail

struct endpoint::impl {
  endpoint_options options;
  endpoint_stats stats;
  std::atomic<int> port{0};
  std::atomic<bool> loopback_only{false};
  /// Data-plane bytes by peer: received by the sender's host, sent by the receiver's address.
  std::mutex peer_bytes_mu;
  std::map<std::string, peer_traffic> peer_bytes;
  void count_peer(const std::string& peer, uint64_t received, uint64_t sent) {
    std::lock_guard lock(peer_bytes_mu);
    auto& p = peer_bytes[peer];
    p.bytes_received += received;
    p.bytes_sent += sent;
  }

  // The mailbox: tasks posted from any thread, run on the loop thread.
  std::mutex mailbox_mu;
  std::deque<std::function<void()>> mailbox;
  bool stopping = false;
  int wake_fd = -1;
  ~impl() {
    if (wake_fd >= 0)
      ::close(wake_fd);
  }

  std::thread thread;

  /// Step calls on connections of their own, off the loop (net/step_plane.hpp).
  std::shared_ptr<step_plane> steps;
  bool steps_enabled() const { return steps && options.step_calls && options.tls_cert.empty(); }

  /// Frames written by the sending thread (net/endpoint_direct.cpp): one data connection per
  /// peer on this host, its socket written under its lock by whichever thread sends.
  struct direct_peer {
    direct_peer() = default;
    ~direct_peer();
    direct_peer(const direct_peer&) = delete;
    direct_peer& operator=(const direct_peer&) = delete;
    std::mutex mu; ///< one writer at a time: ring positions reach the receiver in order
    /// The blocking socket (-1 while the loop opens it); closed only when the last sender lets
    /// go (a number reused meanwhile is not ours).
    int fd = -1;
    std::shared_ptr<shm_ring> ring; ///< null: the receiver did not map one (payloads inline)
    bool broken = false;
    /// Frames sent while the connection opens, in order.
    struct waiting_frame {
      int64_t step;
      std::string key;
      tensor value;
      send_options o;
      std::shared_ptr<detail::once<status>> done;
    };
    std::vector<waiting_frame> waiting;
  };
  std::mutex direct_mu;
  std::map<std::string, std::shared_ptr<direct_peer>> direct_peers; ///< by address
  /// Whether a frame of `value` to `address` goes that way.
  bool direct_wanted(const std::string& address, const tensor& value) const;
  /// Sends the frame that way (or queues it while the connection opens) and answers `done`
  /// (true), or leaves both to the loop (false).
  bool send_direct(const std::string& address, int64_t step, const std::string& key, tensor& value,
                   const send_options& o, std::function<void(status)>& done);
  /// Writes one frame on `peer` (its lock held); the bytes written, or 0 when the connection
  /// is lost (then dropped).
  uint64_t write_direct(const std::string& address, direct_peer& peer, int64_t step,
                        const std::string& key, const tensor& value, const send_options& o);
  /// Marks `peer` broken and drops it.
  void drop_direct(const std::string& address, direct_peer& peer);
  /// Drops the direct connection to `address` (`only`: if it is still that one).
  void forget_direct(const std::string& address, const direct_peer* only);
  /// Answers the frames waiting in `peer` with `s`.
  void fail_waiting(direct_peer& peer, const status& s);

  // Loop-thread state (created and destroyed on the loop thread).
  struct loop_state;
  loop_state* loop = nullptr;

  // Replies the services owe, by id: filled on the loop thread when their done callbacks post.
  uint64_t next_reply_id = 1;
  // Posted by the destructor: ends the loop.
  std::function<void()> stop_task;

  /// False once the loop has stopped (the task is dropped: it must hold only plain data).
  /// The loop is woken only by the first task into an empty mailbox: it takes the whole mailbox
  /// at once, so later tasks ride on that wake-up (one eventfd write per batch, not per task).
  bool post(std::function<void()> task) {
    bool first;
    {
      std::lock_guard lock(mailbox_mu);
      if (stopping)
        return false;
      first = mailbox.empty();
      mailbox.push_back(std::move(task));
    }
    if (first) {
      uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
    }
    return true;
  }

  void log(const std::string& line) {
    if (options.log)
      options.log(line);
    else
      std::fprintf(stderr, "runnel net: %s\n", line.c_str());
  }

  void run_loop(std::promise<status>& started);
};

// Everything that lives on the loop thread.
struct endpoint::impl::loop_state final : kj::TaskSet::ErrorHandler {
  impl& ep;
  kj::AsyncIoContext io;
  kj::UnixEventPort::FdObserver wake;
  kj::Own<kj::ConnectionReceiver> listener;
  capnp::ReaderOptions rpc_options;
  /// TLS for both planes (null: plain TCP); the key pair and CA live as long as it.
  kj::Own<kj::TlsKeypair> tls_keypair;
  kj::Own<kj::TlsCertificate> tls_ca;
  kj::Own<kj::TlsContext> tls;
  /// Reads the PEM files of endpoint_options and makes `tls` (run_loop calls it).
  status setup_tls();

  // ---- client side (endpoint.cpp) ----

  // Outgoing RPC connections, by address.
  struct rpc_conn {
    kj::Own<kj::AsyncIoStream> stream;
    kj::Own<capnp::TwoPartyVatNetwork> network;
    kj::Own<capnp::RpcSystem<capnp::rpc::twoparty::VatId>> rpc;
    wire::Node::Client node = nullptr;
    wire::Worker::Client worker = nullptr;
    wire::Master::Client master = nullptr;
  };
  struct rpc_peer {
    kj::Own<rpc_conn> conn;                       // live connection
    kj::Maybe<kj::ForkedPromise<void>> connecting; // in progress
  };
  std::map<std::string, rpc_peer> rpc_peers;

  // A frame ready to write: header length and header, payload pieces.
  struct frame {
    frame_header header;        // what `head` encodes
    std::string head;           // encode_frame_header's bytes
    std::string shm_head;       // the header sent instead when the payload went by the ring
    tensor value;               // keeps the buffer alive until written
    std::vector<uint16_t> bf16; // the payload, when truncated
    std::vector<kj::ArrayPtr<const kj::byte>> pieces;
    uint64_t total = 0;
    int64_t priority = 0;
  };

  // Outgoing data connections, by address: writes chained one after another.
  struct data_peer {
    kj::Own<kj::AsyncIoStream> stream;
    /// Streams replaced by a fresh connection, kept because the hang-up watches in `tasks` may
    /// still refer to them (destroying a stream under a pending read is a use after free).
    std::vector<kj::Own<kj::AsyncIoStream>> retired;
    kj::Maybe<kj::ForkedPromise<void>> connecting;
    kj::Promise<void> last = kj::READY_NOW; // the tail of the write chain
    bool broken = false;
    uint64_t generation = 0;
    /// This connection's shared-memory ring, when its receiver mapped it (net/shm_ring.hpp).
    std::shared_ptr<shm_ring> ring;
    /// Frames waiting for their turn, by (generation, priority, arrival): each frame adds one
    /// link to the write chain, and each link writes the most urgent frame of its generation
    /// waiting then (send_options::priority).
    struct waiting_frame {
      std::shared_ptr<frame> f;
      kj::Own<kj::PromiseFulfiller<void>> written;
    };
    std::map<std::tuple<uint64_t, int64_t, uint64_t>, waiting_frame> waiting;
    uint64_t arrivals = 0;
  };
  std::map<std::string, kj::Own<data_peer>> data_peers;

  kj::Promise<kj::Own<kj::NetworkAddress>> resolve(const std::string& address);
  /// Connects to `address` and exchanges the preamble for a connection of `kind`.
  /// With `extra`, those bytes follow the token (a data_shm connection's ring offer), and the
  /// byte after the server's `ok` lands in `*second` (whether it mapped the ring).
  kj::Promise<kj::Own<kj::AsyncIoStream>> open(const std::string& address, conn_kind kind,
                                               std::string extra = {},
                                               std::shared_ptr<uint8_t> second = nullptr);
  /// The RPC connection to `address`, connecting if needed.
  kj::Promise<rpc_conn*> rpc_to(const std::string& address);
  kj::Promise<data_peer*> data_to(const std::string& address);
  /// Whether data connections to `address` offer a shared-memory ring (a loopback address).
  bool ring_wanted(const std::string& address) const;
  /// Puts `f`'s payload into `peer`'s ring if it fits there now; then `f->shm_head` is set.
  void place_in_ring(data_peer& peer, frame& f);
  std::shared_ptr<frame> make_frame(int64_t step, const std::string& key, tensor value,
                                    send_options opts);
  kj::Promise<void> write_frame(std::string address, std::shared_ptr<frame> f, bool may_retry);
  void send_tensor(std::string address, int64_t step, std::string key, tensor value,
                   send_options opts, std::function<void(status)> done);
  /// Drops the connections to `address` (its task failed): the next call reconnects.
  void forget(const std::string& address);
  /// Opens `peer`'s connection to `address`, then writes the frames waiting in it.
  void open_direct(const std::string& address, std::shared_ptr<direct_peer> peer);
  /// `peer`'s connection is open on `fd` (-1: it could not be opened) with `ring` (null: none
  /// mapped): writes the frames waiting in it, and sends those it cannot the loop's way.
  void flush_waiting(const std::string& address, direct_peer& peer, int fd,
                     std::shared_ptr<shm_ring> ring);
  /// Opens a step connection to `address` and hands its socket, made blocking, to `done`.
  void open_step(const std::string& address, std::function<void(result<int>)> done);

  /// Runs `call` against the RPC connection to `address`; failures reach `fail`.
  template <class Call>
  void with_rpc(const std::string& address, Call call, std::function<void(status)> fail) {
    // The connection is looked up again when the call runs: between rpc_to's answer and this
    // continuation, forget() or a disconnect may have destroyed it (a use after free once
    // crashed a master that cleaned up a step right after forgetting a dead task).
    tasks.add(rpc_to(address)
                  .then([this, address, call = kj::mv(call)](rpc_conn*) mutable {
                    auto it = rpc_peers.find(address);
                    if (it == rpc_peers.end() || !it->second.conn)
                      return kj::Promise<void>(KJ_EXCEPTION(
                          DISCONNECTED, "the connection closed before the call was sent"));
                    return kj::Promise<void>(call(*it->second.conn));
                  })
                  .then([]() {},
                        [fail, peer = describe_peer(ep.options, address)](kj::Exception&& e) {
                          fail(detail::from_exception(e, peer));
                        }));
  }

  // ---- serving side (endpoint_serve.cpp) ----

  struct served;       // an accepted connection
  struct frame_reader; // a data connection's receiving state
  /// Connections past their handshake, by peer host: for `max_connections_per_peer`.
  std::map<std::string, int> connections_by_peer;
  int handshakes_in_progress = 0;
  /// When the last "too many" line was logged, to log a burst once.
  std::chrono::steady_clock::time_point last_limit_log{};

  kj::Promise<void> accept_loop();
  kj::Promise<void> serve(kj::Own<kj::AsyncIoStream> stream, std::string peer);
  /// Reads a data_shm connection's ring offer, maps the ring if the peer is on this host, and
  /// answers `ok` and whether it did; yields conn_kind::data.
  kj::Promise<uint8_t> accept_ring(kj::AsyncIoStream& s, std::shared_ptr<shm_view>& into,
                                   const std::string& peer);
  kj::Promise<void> serve_rpc(kj::Own<served> c);
  kj::Promise<void> serve_data(kj::Own<served> c);
  /// Hands a step connection's socket to the step plane; resolves when its thread ends.
  kj::Promise<void> serve_step(kj::Own<served> c);
  kj::Promise<void> read_frames(frame_reader& r);
  kj::Promise<void> read_payload(frame_reader& r);
  kj::Promise<void> deliver(frame_reader& r);
  kj::Promise<void> reject(frame_reader& r, const std::string& why);
  /// Resolves when `c` has moved no byte for `idle_timeout` and has no call in flight.
  kj::Promise<void> idle_watch(served& c);
  /// Logs a limit that was hit: the first of a burst, then at most once a second.
  void log_limit(const std::string& line);

  // Service replies pending, by id (see the RPC servers).
  std::unordered_map<uint64_t, kj::Own<kj::PromiseFulfiller<void>>> pending_replies;

  // Declared last, destroyed first: cancelling the tasks releases what they hold of the
  // connections above.
  kj::TaskSet tasks;

  explicit loop_state(impl& e)
      : ep(e), io(kj::setupAsyncIo()),
        wake(io.unixEventPort, e.wake_fd, kj::UnixEventPort::FdObserver::OBSERVE_READ),
        tasks(*this) {
    rpc_options.traversalLimitInWords = ep.options.max_rpc_message_bytes / 8;
    rpc_options.nestingLimit = 64;
  }

  void debug(const std::string& line) {
    static const bool on = std::getenv("RUNNEL_NET_DEBUG") != nullptr;
    if (on)
      ep.log("debug: " + line);
  }

  void taskFailed(kj::Exception&& e) override {
    ep.log("network task failed: " + detail::to_std(e.getDescription()));
  }

  /// The mailbox's reader.
  kj::Promise<void> drain();
};

/// The RPC service a connection gets (endpoint_serve.cpp); `calls` counts its calls in flight.
kj::Own<capnp::Capability::Server> make_node_server(endpoint::impl& ep,
                                                     std::shared_ptr<int> calls);

} // namespace runnel::net
