// The endpoint's event loop: kj async I/O on one thread, Cap'n Proto RPC for the control plane,
// framed tensors on plain TCP streams for the data plane.
#include "net/endpoint.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <capnp/message.h>
#include <capnp/rpc-twoparty.h>
#include <capnp/serialize.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <kj/debug.h>

#include "net/cluster.capnp.h"
#include "net/tensor_codec.hpp"

namespace runnel::net {
namespace {

constexpr char preamble_magic[8] = {'R', 'U', 'N', 'N', 'E', 'L', '0', '1'};
constexpr uint8_t kind_rpc = 1, kind_data = 2;
constexpr uint8_t answer_ok = 0, answer_bad_token = 1, answer_bad_preamble = 2;
constexpr uint32_t max_token_bytes = 4096;
constexpr auto connect_timeout = 5 * kj::SECONDS;
constexpr auto preamble_timeout = 5 * kj::SECONDS;

std::string to_std(kj::StringPtr s) {
  return std::string(s.cStr(), s.size());
}
std::string to_std(capnp::Data::Reader d) {
  return std::string(reinterpret_cast<const char*>(d.begin()), d.size());
}
kj::ArrayPtr<const kj::byte> bytes_of(const std::string& s) {
  return kj::arrayPtr(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

/// A kj exception as a status naming the peer.
status from_exception(const kj::Exception& e, const std::string& peer) {
  std::string what = to_std(e.getDescription());
  if (e.getType() == kj::Exception::Type::DISCONNECTED)
    return unavailable("connection to " + peer + " lost: " + what);
  if (e.getType() == kj::Exception::Type::OVERLOADED)
    return unavailable(peer + " is overloaded: " + what);
  return unavailable(peer + ": " + what);
}

void write_status(wire::Status::Builder b, const status& s) {
  b.setCode(int32_t(s.code()));
  b.setMessage(s.message());
}
status read_status(wire::Status::Reader r) {
  if (r.getCode() == 0)
    return {};
  int code = r.getCode();
  if (code < 1 || code > int(error_code::unauthenticated))
    code = int(error_code::unknown);
  return status(error_code(code), to_std(r.getMessage()));
}

void write_named(capnp::List<wire::NamedTensor>::Builder list, const named_tensors& ts) {
  for (size_t i = 0; i < ts.size(); ++i) {
    list[uint(i)].setName(ts[i].first);
    write_tensor(list[uint(i)].initTensor(), ts[i].second);
  }
}
result<named_tensors> read_named(capnp::List<wire::NamedTensor>::Reader list) {
  named_tensors out;
  for (auto nt : list) {
    auto t = read_tensor(nt.getTensor());
    if (!t)
      return t.error().with_context("tensor '" + to_std(nt.getName()) + "'");
    out.emplace_back(to_std(nt.getName()), std::move(t).value());
  }
  return out;
}
std::vector<std::string> read_texts(capnp::List<capnp::Text>::Reader list) {
  std::vector<std::string> out;
  for (auto t : list)
    out.push_back(to_std(t));
  return out;
}

worker_status read_worker_status(wire::WorkerStatus::Reader r) {
  worker_status s;
  s.task = {to_std(r.getJob()), r.getTask()};
  s.incarnation = r.getIncarnation();
  s.cluster = to_std(r.getCluster());
  for (auto d : r.getDevices())
    s.devices.push_back({to_std(d.getName()), to_std(d.getType()), d.getMemoryBytes(),
                         d.getFlopsPerS(), d.getBytesPerS()});
  return s;
}

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

} // namespace

// ---------------------------------------------------------------------------------------------

struct endpoint::impl {
  endpoint_options options;
  endpoint_stats stats;
  std::atomic<int> port{0};

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

  // Loop-thread state (created and destroyed on the loop thread).
  struct loop_state;
  loop_state* loop = nullptr;

  // Replies the services owe, by id: filled on the loop thread when their done callbacks post.
  uint64_t next_reply_id = 1;
  // Posted by the destructor: ends the loop.
  std::function<void()> stop_task;

  /// False once the loop has stopped (the task is dropped: it must hold only plain data).
  bool post(std::function<void()> task) {
    {
      std::lock_guard lock(mailbox_mu);
      if (stopping)
        return false;
      mailbox.push_back(std::move(task));
    }
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
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
struct endpoint::impl::loop_state : kj::TaskSet::ErrorHandler {
  impl& ep;
  kj::AsyncIoContext io;
  kj::UnixEventPort::FdObserver wake;
  kj::Own<kj::ConnectionReceiver> listener;
  capnp::ReaderOptions rpc_options;

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

  // Outgoing data connections, by address: writes chained in order.
  struct data_peer {
    kj::Own<kj::AsyncIoStream> stream;
    /// Streams replaced by a fresh connection, kept because the hang-up watches in `tasks` may
    /// still refer to them (destroying a stream under a pending read is a use after free).
    std::vector<kj::Own<kj::AsyncIoStream>> retired;
    kj::Maybe<kj::ForkedPromise<void>> connecting;
    kj::Promise<void> last = kj::READY_NOW; // the tail of the write chain
    bool broken = false;
    uint64_t generation = 0;
  };
  std::map<std::string, kj::Own<data_peer>> data_peers;

  // Service replies pending, by id (see worker/master servers below).
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
    ep.log("network task failed: " + to_std(e.getDescription()));
  }

  // The mailbox's reader.
  kj::Promise<void> drain() {
    return wake.whenBecomesReadable().then([this]() {
      uint64_t count;
      [[maybe_unused]] auto n = ::read(ep.wake_fd, &count, sizeof count);
      std::deque<std::function<void()>> batch;
      {
        std::lock_guard lock(ep.mailbox_mu);
        batch.swap(ep.mailbox);
      }
      for (auto& t : batch)
        t();
      return drain();
    });
  }

  kj::Promise<kj::Own<kj::NetworkAddress>> resolve(const std::string& address) {
    auto split = cluster_spec::split_address(address);
    if (!split)
      return KJ_EXCEPTION(FAILED, split.error().message());
    return io.provider->getNetwork().parseAddress(split->first, uint(split->second));
  }

  // Connects to `address` and exchanges the preamble for a connection of `kind`.
  kj::Promise<kj::Own<kj::AsyncIoStream>> open(const std::string& address, uint8_t kind) {
    auto& timer = io.provider->getTimer();
    auto connected = resolve(address).then(
        [](kj::Own<kj::NetworkAddress> a) { return a->connect().attach(kj::mv(a)); });
    return timer.timeoutAfter(connect_timeout, kj::mv(connected))
        .then([this, kind, address](kj::Own<kj::AsyncIoStream> stream) {
          auto pre = kj::heapArray<kj::byte>(16 + ep.options.auth_token.size());
          std::memcpy(pre.begin(), preamble_magic, 8);
          pre[8] = kind;
          pre[9] = pre[10] = pre[11] = 0;
          uint32_t n = uint32_t(ep.options.auth_token.size());
          std::memcpy(pre.begin() + 12, &n, 4);
          std::memcpy(pre.begin() + 16, ep.options.auth_token.data(), n);
          auto& s = *stream;
          auto answer = kj::heap<kj::byte>(0);
          auto& a = *answer;
          return s.write(pre.begin(), pre.size())
              .attach(kj::mv(pre))
              .then([&s, &a]() { return s.read(&a, 1); })
              .then([stream = kj::mv(stream), answer = kj::mv(answer),
                     address]() mutable -> kj::Own<kj::AsyncIoStream> {
                if (*answer == answer_bad_token)
                  KJ_FAIL_REQUIRE("the node refused our auth token (is --auth-token-file the "
                                  "same on both sides?)");
                if (*answer != answer_ok)
                  KJ_FAIL_REQUIRE("the node refused the connection preamble");
                return kj::mv(stream);
              });
        });
  }

  // The RPC connection to `address`, connecting if needed.
  kj::Promise<rpc_conn*> rpc_to(const std::string& address) {
    auto& peer = rpc_peers[address];
    if (peer.conn)
      return peer.conn.get();
    KJ_IF_MAYBE(c, peer.connecting) {
      return c->addBranch().then([this, address]() -> kj::Promise<rpc_conn*> {
        return rpc_to(address);
      });
    }
    auto fork = open(address, kind_rpc)
                    .then([this, address](kj::Own<kj::AsyncIoStream> stream) {
                      auto conn = kj::heap<rpc_conn>();
                      conn->stream = kj::mv(stream);
                      conn->network = kj::heap<capnp::TwoPartyVatNetwork>(
                          *conn->stream, capnp::rpc::twoparty::Side::CLIENT, rpc_options);
                      conn->rpc = kj::heap<capnp::RpcSystem<capnp::rpc::twoparty::VatId>>(
                          capnp::makeRpcClient(*conn->network));
                      capnp::MallocMessageBuilder vat;
                      auto id = vat.initRoot<capnp::rpc::twoparty::VatId>();
                      id.setSide(capnp::rpc::twoparty::Side::SERVER);
                      conn->node = conn->rpc->bootstrap(id).castAs<wire::Node>();
                      conn->worker = conn->node.workerRequest().send().getWorker();
                      conn->master = conn->node.masterRequest().send().getMaster();
                      // When it drops, forget it: the next call reconnects.
                      auto* raw = conn.get();
                      debug("rpc connection to " + address + " open");
                      tasks.add(conn->network->onDisconnect().then([this, address, raw]() {
                        debug("rpc connection to " + address + " closed");
                        auto it = rpc_peers.find(address);
                        if (it != rpc_peers.end() && it->second.conn.get() == raw)
                          rpc_peers.erase(it);
                      }));
                      auto& p = rpc_peers[address];
                      p.conn = kj::mv(conn);
                      p.connecting = nullptr;
                    },
                          [this, address](kj::Exception&& e) {
                            rpc_peers.erase(address);
                            kj::throwFatalException(kj::mv(e));
                          })
                    .fork();
    auto branch = fork.addBranch();
    peer.connecting = kj::mv(fork);
    return branch.then([this, address]() -> kj::Promise<rpc_conn*> {
      auto it = rpc_peers.find(address);
      if (it == rpc_peers.end() || !it->second.conn)
        return KJ_EXCEPTION(DISCONNECTED, "connection closed while opening");
      return it->second.conn.get();
    });
  }

  // Runs `call` against the RPC connection to `address`; failures reach `fail`.
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
                  .then([]() {}, [fail, address](kj::Exception&& e) {
                    fail(from_exception(e, "task at " + address));
                  }));
  }

  // ---- data plane: sending -------------------------------------------------------------

  kj::Promise<data_peer*> data_to(const std::string& address) {
    auto& slot = data_peers[address];
    if (!slot)
      slot = kj::heap<data_peer>();
    data_peer* peer = slot.get();
    if (peer->stream && !peer->broken)
      return peer;
    KJ_IF_MAYBE(c, peer->connecting) {
      return c->addBranch().then([this, address]() { return data_to(address); });
    }
    auto fork = open(address, kind_data)
                    .then([this, peer](kj::Own<kj::AsyncIoStream> stream) {
                      if (peer->stream) {
                        // Its watches end once its dead peer's reset arrives; the oldest of a
                        // few are long past that.
                        peer->retired.push_back(kj::mv(peer->stream));
                        if (peer->retired.size() > 4)
                          peer->retired.erase(peer->retired.begin());
                      }
                      peer->stream = kj::mv(stream);
                      peer->broken = false;
                      peer->last = kj::READY_NOW;
                      peer->connecting = nullptr;
                      auto gen = ++peer->generation;
                      debug("data connection open (generation " + std::to_string(gen) + ")");
                      // A peer that goes away (a task killed and restarted) must not leave a
                      // dead stream for the next send: notice the hang-up now.
                      tasks.add(peer->stream->whenWriteDisconnected().then(
                          [this, peer, gen]() {
                            debug("data connection hung up (generation " + std::to_string(gen) + ")");
                            if (peer->generation == gen)
                              peer->broken = true;
                          },
                          [peer, gen](kj::Exception&&) {
                            if (peer->generation == gen)
                              peer->broken = true;
                          }));
                      // A peer that exited sends FIN at once, but a socket only reports the
                      // hang-up after a write draws a reset, and that first write is lost
                      // silently (a restarted worker then waited forever for the tensor). The
                      // receiver never writes on a data stream: a read that ends means it is
                      // gone.
                      auto byte = kj::heapArray<kj::byte>(1);
                      auto* b = byte.begin();
                      tasks.add(peer->stream->tryRead(b, 1, 1)
                                    .then(
                                        [this, peer, gen](size_t) {
                                          debug("data connection closed by its peer (generation " +
                                                std::to_string(gen) + ")");
                                          if (peer->generation == gen)
                                            peer->broken = true;
                                        },
                                        [peer, gen](kj::Exception&&) {
                                          if (peer->generation == gen)
                                            peer->broken = true;
                                        })
                                    .attach(kj::mv(byte)));
                    },
                          [peer](kj::Exception&& e) {
                            peer->connecting = nullptr;
                            kj::throwFatalException(kj::mv(e));
                          })
                    .fork();
    auto branch = fork.addBranch();
    peer->connecting = kj::mv(fork);
    return branch.then([peer]() { return peer; });
  }

  // A frame ready to write: header length, header, payload pieces.
  struct frame {
    capnp::MallocMessageBuilder header;
    kj::Array<capnp::word> flat;
    uint32_t length = 0;
    tensor value;               // keeps the buffer alive until written
    std::vector<uint16_t> bf16; // the payload, when truncated
    std::vector<kj::ArrayPtr<const kj::byte>> pieces;
    uint64_t total = 0;
  };

  std::shared_ptr<frame> make_frame(int64_t step, const std::string& key, tensor value,
                                    send_options opts) {
    auto f = std::make_shared<frame>();
    auto h = f->header.initRoot<wire::TensorFrame>();
    h.setStepId(step);
    h.setKey(key);
    h.setSenderIncarnation(ep.options.incarnation);
    h.setDtype(to_wire(value.type()));
    write_shape(h.initShape(), value.shape());
    const kj::byte* payload = nullptr;
    uint64_t payload_bytes = 0;
    if (value.type() == dtype::string) {
      write_tensor(h.initStringTensor(), value);
    } else if (opts.bf16 && value.type() == dtype::f32) {
      int64_t n = value.num_elements();
      f->bf16.resize(size_t(n));
      const uint32_t* bits = static_cast<const uint32_t*>(value.raw_data());
      for (int64_t i = 0; i < n; ++i)
        f->bf16[size_t(i)] = uint16_t(bits[i] >> 16);
      h.setWireBf16(true);
      payload = reinterpret_cast<const kj::byte*>(f->bf16.data());
      payload_bytes = uint64_t(n) * 2;
    } else {
      payload = static_cast<const kj::byte*>(value.raw_data());
      payload_bytes = value.bytes();
    }
    h.setPayloadBytes(payload_bytes);
    f->flat = capnp::messageToFlatArray(f->header);
    f->length = uint32_t(f->flat.asBytes().size());
    f->value = std::move(value);
    f->pieces.push_back(kj::arrayPtr(reinterpret_cast<const kj::byte*>(&f->length), 4));
    f->pieces.push_back(f->flat.asBytes());
    for (uint64_t off = 0; off < payload_bytes; off += ep.options.chunk_bytes)
      f->pieces.push_back(kj::arrayPtr(
          payload + off, std::min<uint64_t>(ep.options.chunk_bytes, payload_bytes - off)));
    f->total = 4 + f->length + payload_bytes;
    return f;
  }

  // Writes `f` after the frames already queued for `address`. A connection that was open before
  // this frame came may be stale (its peer died, maybe restarted, and no write has told us yet):
  // if writing on it fails, the frame goes once more on a fresh connection. A receiver drops a
  // frame cut short, so nothing arrives twice but for the rare frame that was delivered whole
  // before the reset; the rendezvous keeps one value per key.
  kj::Promise<void> write_frame(std::string address, std::shared_ptr<frame> f, bool may_retry) {
    auto it = data_peers.find(address);
    bool was_open = it != data_peers.end() && it->second->stream && !it->second->broken;
    auto used = std::make_shared<uint64_t>(0); // the generation this write went to
    return data_to(address)
        .then([f, used](data_peer* peer) {
          auto gen = peer->generation;
          *used = gen;
          auto write = kj::mv(peer->last).then([peer, f, gen]() {
            if (peer->broken || peer->generation != gen)
              return kj::Promise<void>(KJ_EXCEPTION(DISCONNECTED, "connection lost"));
            return peer->stream->write(kj::arrayPtr(f->pieces.data(), f->pieces.size()));
          });
          auto forked = write.fork();
          peer->last = forked.addBranch().then([]() {}, [peer, gen](kj::Exception&&) {
            if (peer->generation == gen)
              peer->broken = true;
          });
          return forked.addBranch();
        })
        .catch_([this, address, f, may_retry, was_open,
                 used](kj::Exception&& e) -> kj::Promise<void> {
          if (!may_retry || !was_open)
            return kj::mv(e);
          debug("resending a frame to " + address + " on a fresh connection after: " +
                to_std(e.getDescription()));
          // Only the connection this frame failed on is broken: frames queued behind it fail
          // too, after an earlier one may already have opened the fresh connection.
          auto peer = data_peers.find(address);
          if (peer != data_peers.end() && peer->second->generation == *used)
            peer->second->broken = true;
          return write_frame(address, f, false);
        });
  }

  void send_tensor(std::string address, int64_t step, std::string key, tensor value,
                   send_options opts, std::function<void(status)> done) {
    auto cb = std::make_shared<once<status>>(std::move(done));
    auto f = make_frame(step, key, std::move(value), opts);
    uint64_t total = f->total;
    tasks.add(write_frame(address, std::move(f), true)
                  .then(
                      [this, cb, total]() {
                        ep.stats.bytes_sent += total;
                        (*cb)(status());
                      },
                      [cb, address](kj::Exception&& e) {
                        (*cb)(from_exception(e, "task at " + address));
                      }));
  }

  /// Drops the connections to `address` (its task failed): the next call reconnects.
  void forget(const std::string& address) {
    rpc_peers.erase(address);
    auto it = data_peers.find(address);
    if (it != data_peers.end())
      it->second->broken = true;
  }

  // ---- serving ---------------------------------------------------------------------------

  kj::Promise<void> accept_loop() {
    return listener->accept().then([this](kj::Own<kj::AsyncIoStream> stream) {
      tasks.add(serve(kj::mv(stream)));
      return accept_loop();
    });
  }

  kj::Promise<void> serve(kj::Own<kj::AsyncIoStream> stream) {
    auto head = kj::heapArray<kj::byte>(16);
    auto& s = *stream;
    auto read_head = s.read(head.begin(), 16);
    return io.provider->getTimer()
        .timeoutAfter(preamble_timeout, kj::mv(read_head))
        .then([this, &s, head = kj::mv(head)]() mutable -> kj::Promise<uint8_t> {
          uint32_t token_len;
          std::memcpy(&token_len, head.begin() + 12, 4);
          if (std::memcmp(head.begin(), preamble_magic, 8) != 0 ||
              (head[8] != kind_rpc && head[8] != kind_data) || token_len > max_token_bytes) {
            ep.stats.connections_rejected++;
            ep.log("rejected a connection: not a Runnel peer (bad preamble)");
            auto no = kj::heap<kj::byte>(answer_bad_preamble);
            auto& nr = *no;
            return s.write(&nr, 1).attach(kj::mv(no)).then([]() -> uint8_t { return 0; });
          }
          uint8_t kind = head[8];
          auto token = kj::heapArray<kj::byte>(token_len);
          auto& t = token;
          return s.read(t.begin(), t.size())
              .then([this, &s, token = kj::mv(token), kind]() mutable -> kj::Promise<uint8_t> {
                const auto& want = ep.options.auth_token;
                bool good = token.size() == want.size() &&
                            std::memcmp(token.begin(), want.data(), want.size()) == 0;
                kj::byte answer = good ? answer_ok : answer_bad_token;
                if (!good) {
                  ep.stats.connections_rejected++;
                  ep.log("rejected a connection: wrong auth token");
                }
                auto a = kj::heap<kj::byte>(answer);
                auto& ar = *a;
                return s.write(&ar, 1).attach(kj::mv(a)).then(
                    [good, kind]() -> uint8_t { return good ? kind : 0; });
              });
        })
        .then([this, stream = kj::mv(stream)](uint8_t kind) mutable -> kj::Promise<void> {
          if (kind == 0)
            return kj::READY_NOW;
          ep.stats.connections_accepted++;
          debug(std::string("accepted a ") + (kind == kind_rpc ? "rpc" : "data") + " connection");
          if (kind == kind_rpc)
            return serve_rpc(kj::mv(stream));
          return serve_data(kj::mv(stream));
        })
        .then([this]() { debug("an accepted connection ended"); }, [this](kj::Exception&& e) {
          debug("an accepted connection failed: " + to_std(e.getDescription()));
          if (e.getType() != kj::Exception::Type::DISCONNECTED)
            ep.log("connection closed: " + to_std(e.getDescription()));
        });
  }

  kj::Promise<void> serve_rpc(kj::Own<kj::AsyncIoStream> stream);

  kj::Promise<void> serve_data(kj::Own<kj::AsyncIoStream> stream) {
    struct reader {
      kj::Own<kj::AsyncIoStream> stream;
      uint32_t length = 0;
      uint64_t frames = 0;
    };
    auto r = kj::heap<reader>();
    r->stream = kj::mv(stream);
    auto& rr = *r;
    return read_frames(rr).attach(kj::mv(r));
  }

  kj::Promise<void> read_frames(auto& r) {
    return r.stream->tryRead(&r.length, 4, 4).then([this, &r](size_t n) -> kj::Promise<void> {
      if (n == 0)
        return kj::READY_NOW; // the peer closed between frames
      if (n < 4)
        return reject(r, "truncated frame length");
      if (r.length == 0 || r.length % 8 != 0 || r.length > ep.options.max_rpc_message_bytes)
        return reject(r, "header length " + std::to_string(r.length) + " is invalid");
      auto words = kj::heapArray<capnp::word>(r.length / 8);
      auto& w = words;
      return r.stream->read(w.begin(), r.length)
          .then([this, &r, words = kj::mv(words)]() mutable -> kj::Promise<void> {
            capnp::ReaderOptions opts;
            opts.traversalLimitInWords = words.size() * 4 + 64;
            opts.nestingLimit = 16;
            struct parsed {
              int64_t step = 0;
              std::string key;
              tensor value;
              uint64_t payload = 0;
              bool bf16 = false;
            };
            auto p = kj::heap<parsed>();
            std::string problem;
            KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
                          capnp::FlatArrayMessageReader msg(words, opts);
                          auto h = msg.getRoot<wire::TensorFrame>();
                          p->step = h.getStepId();
                          p->key = to_std(h.getKey());
                          p->payload = h.getPayloadBytes();
                          p->bf16 = h.getWireBf16();
                          auto type = from_wire(h.getDtype());
                          auto sh = read_shape(h.getShape());
                          if (!type || !sh) {
                            problem = (!type ? type.error() : sh.error()).message();
                            return;
                          }
                          if (*type == dtype::string) {
                            auto t = read_tensor(h.getStringTensor());
                            if (!t) {
                              problem = t.error().message();
                              return;
                            }
                            if (p->payload != 0) {
                              problem = "a string tensor with a payload";
                              return;
                            }
                            p->value = std::move(t).value();
                            return;
                          }
                          if (!sh->is_fully_defined()) {
                            problem = "shape " + sh->to_string() + " is not fully defined";
                            return;
                          }
                          uint64_t elements = uint64_t(sh->num_elements());
                          uint64_t want = p->bf16 ? elements * 2 : elements * size_of(*type);
                          if (p->bf16 && *type != dtype::f32) {
                            problem = "bf16 on the wire for a " + std::string(name(*type)) +
                                      " tensor";
                            return;
                          }
                          if (p->payload != want || p->payload > ep.options.max_payload_bytes) {
                            problem = "payload of " + std::to_string(p->payload) +
                                      " bytes for a " + std::string(name(*type)) +
                                      " tensor of shape " + sh->to_string() + " (limit " +
                                      std::to_string(ep.options.max_payload_bytes) + ")";
                            return;
                          }
                          p->value = tensor(*type, *sh);
                        })) {
              problem = to_std(e->getDescription());
            }
            if (!problem.empty())
              return reject(r, problem);
            if (p->payload == 0)
              return deliver(r, kj::mv(p));
            auto* dst = static_cast<kj::byte*>(p->value.raw_data());
            auto& pr = *p;
            return read_payload(r, dst, pr.payload, 0).then(
                [this, &r, p = kj::mv(p)]() mutable { return deliver(r, kj::mv(p)); });
          });
    });
  }

  kj::Promise<void> read_payload(auto& r, kj::byte* dst, uint64_t total, uint64_t done) {
    if (done == total)
      return kj::READY_NOW;
    uint64_t n = std::min<uint64_t>(ep.options.chunk_bytes, total - done);
    return r.stream->read(dst + done, n).then([this, &r, dst, total, done, n]() {
      return read_payload(r, dst, total, done + n);
    });
  }

  template <class P> kj::Promise<void> deliver(auto& r, kj::Own<P> p) {
    if (p->bf16) {
      // Widen in place, from the end: element i's 4 bytes cover bf16 elements >= i.
      auto* half = static_cast<const uint16_t*>(p->value.raw_data());
      auto* full = static_cast<uint32_t*>(p->value.raw_data());
      for (int64_t i = p->value.num_elements() - 1; i >= 0; --i)
        full[i] = uint32_t(half[i]) << 16;
    }
    r.frames++;
    ep.stats.frames_received++;
    ep.stats.bytes_received += 4 + r.length + p->payload;
    if (ep.options.on_tensor)
      ep.options.on_tensor(p->step, std::move(p->key), std::move(p->value));
    return read_frames(r);
  }

  kj::Promise<void> reject(auto& r, const std::string& why) {
    ep.stats.frames_rejected++;
    ep.log("data connection: frame " + std::to_string(r.frames) + " rejected: " + why +
           "; closing the connection");
    return kj::READY_NOW;
  }
};

// ---- RPC servers ---------------------------------------------------------------------------

namespace {

class worker_server final : public wire::Worker::Server {
public:
  explicit worker_server(endpoint::impl& ep) : ep_(ep) {}

  kj::Promise<void> getStatus(GetStatusContext context) override {
    auto s = ep_.options.worker->status();
    auto b = context.getResults().initStatus();
    b.setJob(s.task.job);
    b.setTask(s.task.task);
    b.setIncarnation(s.incarnation);
    b.setCluster(s.cluster);
    auto devs = b.initDevices(uint(s.devices.size()));
    for (size_t i = 0; i < s.devices.size(); ++i) {
      auto& d = s.devices[i];
      devs[uint(i)].setName(d.name);
      devs[uint(i)].setType(d.type);
      devs[uint(i)].setMemoryBytes(d.memory_bytes);
      devs[uint(i)].setFlopsPerS(d.flops_per_s);
      devs[uint(i)].setBytesPerS(d.bytes_per_s);
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> registerGraph(RegisterGraphContext context) override {
    std::string bytes = to_std(context.getParams().getGraph());
    context.releaseParams();
    return await<std::string>(
        [&](callback<std::string> done) {
          ep_.options.worker->register_graph(std::move(bytes), std::move(done));
        },
        [context](result<std::string>& r) mutable {
          auto res = context.getResults();
          write_status(res.initError(), r.error());
          if (r)
            res.setHandle(*r);
        });
  }

  kj::Promise<void> runGraph(RunGraphContext context) override {
    auto p = context.getParams();
    std::string handle = to_std(p.getHandle());
    int64_t step = p.getStepId();
    auto feeds = read_named(p.getFeeds());
    auto fetches = read_texts(p.getFetches());
    context.releaseParams();
    if (!feeds) {
      write_status(context.getResults().initError(), feeds.error());
      return kj::READY_NOW;
    }
    return await<named_tensors>(
        [&](callback<named_tensors> done) {
          ep_.options.worker->run_graph(handle, step, std::move(feeds).value(),
                                        std::move(fetches), std::move(done));
        },
        [context](result<named_tensors>& r) mutable {
          auto res = context.getResults();
          write_status(res.initError(), r.error());
          if (r)
            write_named(res.initTensors(uint(r->size())), *r);
        });
  }

  kj::Promise<void> cleanupStep(CleanupStepContext context) override {
    ep_.options.worker->cleanup_step(context.getParams().getStepId());
    return kj::READY_NOW;
  }

  kj::Promise<void> deregisterGraph(DeregisterGraphContext context) override {
    ep_.options.worker->deregister_graph(to_std(context.getParams().getHandle()));
    return kj::READY_NOW;
  }

  // Starts a service call whose answer comes through a callback, from any thread; `fill` writes
  // the RPC results on the loop thread, unless the call was cancelled meanwhile.
  template <class T, class Start, class Fill>
  kj::Promise<void> await(Start start, Fill fill) {
    return await_reply<T>(ep_, start, fill);
  }

  template <class T, class Start, class Fill>
  static kj::Promise<void> await_reply(endpoint::impl& ep, Start& start, Fill fill) {
    auto paf = kj::newPromiseAndFulfiller<void>();
    uint64_t id = ep.next_reply_id++;
    ep.loop->pending_replies.emplace(id, kj::mv(paf.fulfiller));
    auto slot = std::make_shared<std::optional<result<T>>>();
    auto* epp = &ep;
    start([epp, id, slot](result<T> r) {
      // Plain data only crosses threads; the loop finds the call by id, if it is still there.
      epp->post([epp, id, slot, r = std::move(r)]() mutable {
        auto it = epp->loop->pending_replies.find(id);
        if (it == epp->loop->pending_replies.end())
          return; // cancelled
        slot->emplace(std::move(r));
        auto f = kj::mv(it->second);
        epp->loop->pending_replies.erase(it);
        f->fulfill();
      });
    });
    return paf.promise
        .then([slot, fill = kj::mv(fill)]() mutable { fill(**slot); })
        .attach(kj::defer([epp, id]() {
          if (epp->loop)
            epp->loop->pending_replies.erase(id);
        }));
  }

private:
  endpoint::impl& ep_;
};

class master_server final : public wire::Master::Server {
public:
  explicit master_server(endpoint::impl& ep) : ep_(ep) {}

  kj::Promise<void> createSession(CreateSessionContext context) override {
    std::string bytes = to_std(context.getParams().getGraph());
    bool cost = context.getParams().getCostModel();
    context.releaseParams();
    auto start = [&](callback<std::string> done) {
      ep_.options.master->create_session(std::move(bytes), cost, std::move(done));
    };
    return worker_server::await_reply<std::string>(
        ep_, start, [context](result<std::string>& r) mutable {
          auto res = context.getResults();
          write_status(res.initError(), r.error());
          if (r)
            res.setHandle(*r);
        });
  }

  kj::Promise<void> extendSession(ExtendSessionContext context) override {
    std::string handle = to_std(context.getParams().getHandle());
    std::string bytes = to_std(context.getParams().getGraph());
    context.releaseParams();
    auto start = [&](callback<bool> done) {
      ep_.options.master->extend_session(handle, std::move(bytes), [done](status s) {
        if (s.ok())
          done(true);
        else
          done(s);
      });
    };
    return worker_server::await_reply<bool>(ep_, start, [context](result<bool>& r) mutable {
      write_status(context.getResults().initError(), r.error());
    });
  }

  kj::Promise<void> run(RunContext context) override {
    auto p = context.getParams();
    std::string handle = to_std(p.getHandle());
    auto feeds = read_named(p.getFeeds());
    auto fetches = read_texts(p.getFetches());
    auto targets = read_texts(p.getTargets());
    context.releaseParams();
    if (!feeds) {
      write_status(context.getResults().initError(), feeds.error());
      return kj::READY_NOW;
    }
    auto start = [&](callback<std::vector<tensor>> done) {
      ep_.options.master->run(handle, std::move(feeds).value(), std::move(fetches),
                              std::move(targets), std::move(done));
    };
    return worker_server::await_reply<std::vector<tensor>>(
        ep_, start, [context](result<std::vector<tensor>>& r) mutable {
          auto res = context.getResults();
          write_status(res.initError(), r.error());
          if (r) {
            auto list = res.initTensors(uint(r->size()));
            for (size_t i = 0; i < r->size(); ++i)
              write_tensor(list[uint(i)], (*r)[i]);
          }
        });
  }

  kj::Promise<void> closeSession(CloseSessionContext context) override {
    ep_.options.master->close_session(to_std(context.getParams().getHandle()));
    return kj::READY_NOW;
  }

private:
  endpoint::impl& ep_;
};

class node_server final : public wire::Node::Server {
public:
  explicit node_server(endpoint::impl& ep) : ep_(ep) {}
  kj::Promise<void> worker(WorkerContext context) override {
    if (!ep_.options.worker)
      return KJ_EXCEPTION(UNIMPLEMENTED, "this node serves no worker");
    context.getResults().setWorker(kj::heap<worker_server>(ep_));
    return kj::READY_NOW;
  }
  kj::Promise<void> master(MasterContext context) override {
    if (!ep_.options.master)
      return KJ_EXCEPTION(UNIMPLEMENTED, "this node serves no master");
    context.getResults().setMaster(kj::heap<master_server>(ep_));
    return kj::READY_NOW;
  }

private:
  endpoint::impl& ep_;
};

} // namespace

kj::Promise<void> endpoint::impl::loop_state::serve_rpc(kj::Own<kj::AsyncIoStream> stream) {
  struct conn {
    kj::Own<kj::AsyncIoStream> stream;
    kj::Own<capnp::TwoPartyVatNetwork> network;
    kj::Own<capnp::RpcSystem<capnp::rpc::twoparty::VatId>> rpc;
  };
  auto c = kj::heap<conn>();
  c->stream = kj::mv(stream);
  c->network = kj::heap<capnp::TwoPartyVatNetwork>(
      *c->stream, capnp::rpc::twoparty::Side::SERVER, rpc_options);
  c->rpc = kj::heap<capnp::RpcSystem<capnp::rpc::twoparty::VatId>>(
      capnp::makeRpcServer(*c->network, kj::heap<node_server>(ep)));
  auto done = c->network->onDisconnect();
  return done.attach(kj::mv(c));
}

// ---- remote handles --------------------------------------------------------------------------

namespace {

class remote_worker_impl final : public remote_worker {
public:
  remote_worker_impl(std::shared_ptr<endpoint::impl> ep, std::string address)
      : ep_(std::move(ep)), address_(std::move(address)) {}
  const std::string& address() const override { return address_; }

  void status(callback<worker_status> done) override {
    call<worker_status>(std::move(done), [](auto& c, auto cb) {
      return c.worker.getStatusRequest().send().then([cb](auto response) mutable {
        (*cb)(read_worker_status(response.getStatus()));
      });
    });
  }

  void register_graph(std::string graph_bytes, callback<std::string> done) override {
    call<std::string>(std::move(done), [bytes = std::move(graph_bytes)](auto& c, auto cb) {
      auto req = c.worker.registerGraphRequest();
      req.setGraph(bytes_of(bytes));
      return req.send().then([cb](auto response) mutable {
        auto s = read_status(response.getError());
        if (!s.ok())
          (*cb)(s);
        else
          (*cb)(to_std(response.getHandle()));
      });
    });
  }

  void run_graph(const std::string& handle, int64_t step_id, named_tensors feeds,
                 std::vector<std::string> fetches, callback<named_tensors> done) override {
    call<named_tensors>(std::move(done), [handle, step_id, feeds = std::move(feeds),
                                          fetches = std::move(fetches)](auto& c, auto cb) {
      auto req = c.worker.runGraphRequest();
      req.setHandle(handle);
      req.setStepId(step_id);
      write_named(req.initFeeds(uint(feeds.size())), feeds);
      auto f = req.initFetches(uint(fetches.size()));
      for (size_t i = 0; i < fetches.size(); ++i)
        f.set(uint(i), fetches[i]);
      return req.send().then([cb](auto response) mutable {
        auto s = read_status(response.getError());
        if (!s.ok())
          (*cb)(s);
        else
          (*cb)(read_named(response.getTensors()));
      });
    });
  }

  void cleanup_step(int64_t step_id) override {
    call<bool>([](result<bool>) {}, [step_id](auto& c, auto cb) {
      auto req = c.worker.cleanupStepRequest();
      req.setStepId(step_id);
      return req.send().then([cb](auto) mutable { (*cb)(true); });
    });
  }

  void deregister_graph(const std::string& handle) override {
    call<bool>([](result<bool>) {}, [handle](auto& c, auto cb) {
      auto req = c.worker.deregisterGraphRequest();
      req.setHandle(handle);
      return req.send().then([cb](auto) mutable { (*cb)(true); });
    });
  }

  // Posts to the loop: connect if needed, make the request, answer `done` once.
  template <class T, class Make> void call(callback<T> done, Make make) {
    auto cb = std::make_shared<once<result<T>>>(std::move(done));
    auto ep = ep_;
    std::string address = address_;
    // If the loop has stopped, the task is dropped and the last release of `cb` answers.
    ep_->post([ep, address, cb, make = std::move(make)]() mutable {
      ep->loop->with_rpc(
          address, [make = std::move(make), cb](auto& conn) mutable { return make(conn, cb); },
          [cb](runnel::status s) { (*cb)(s); });
    });
  }

private:
  std::shared_ptr<endpoint::impl> ep_;
  std::string address_;
};

class remote_master_impl final : public remote_master {
public:
  remote_master_impl(std::shared_ptr<endpoint::impl> ep, std::string address)
      : ep_(std::move(ep)), address_(std::move(address)) {}
  const std::string& address() const override { return address_; }

  void create_session(std::string graph_bytes, bool cost_model,
                      callback<std::string> done) override {
    call<std::string>(std::move(done),
                      [bytes = std::move(graph_bytes), cost_model](auto& c, auto cb) {
                        auto req = c.master.createSessionRequest();
                        req.setGraph(bytes_of(bytes));
                        req.setCostModel(cost_model);
                        return req.send().then([cb](auto response) mutable {
                          auto s = read_status(response.getError());
                          if (!s.ok())
                            (*cb)(s);
                          else
                            (*cb)(to_std(response.getHandle()));
                        });
                      });
  }

  void extend_session(const std::string& handle, std::string graph_bytes,
                      std::function<void(runnel::status)> done) override {
    call<bool>(
        [done](result<bool> r) { done(r.error()); },
        [handle, bytes = std::move(graph_bytes)](auto& c, auto cb) {
          auto req = c.master.extendSessionRequest();
          req.setHandle(handle);
          req.setGraph(bytes_of(bytes));
          return req.send().then([cb](auto response) mutable {
            auto s = read_status(response.getError());
            if (!s.ok())
              (*cb)(s);
            else
              (*cb)(true);
          });
        });
  }

  void run(const std::string& handle, named_tensors feeds, std::vector<std::string> fetches,
           std::vector<std::string> targets, callback<std::vector<tensor>> done) override {
    call<std::vector<tensor>>(
        std::move(done), [handle, feeds = std::move(feeds), fetches = std::move(fetches),
                          targets = std::move(targets)](auto& c, auto cb) {
          auto req = c.master.runRequest();
          req.setHandle(handle);
          write_named(req.initFeeds(uint(feeds.size())), feeds);
          auto f = req.initFetches(uint(fetches.size()));
          for (size_t i = 0; i < fetches.size(); ++i)
            f.set(uint(i), fetches[i]);
          auto t = req.initTargets(uint(targets.size()));
          for (size_t i = 0; i < targets.size(); ++i)
            t.set(uint(i), targets[i]);
          return req.send().then([cb](auto response) mutable {
            auto s = read_status(response.getError());
            if (!s.ok()) {
              (*cb)(s);
              return;
            }
            std::vector<tensor> out;
            for (auto tr : response.getTensors()) {
              auto v = read_tensor(tr);
              if (!v) {
                (*cb)(v.error().with_context("fetched tensor " + std::to_string(out.size())));
                return;
              }
              out.push_back(std::move(v).value());
            }
            (*cb)(std::move(out));
          });
        });
  }

  void close_session(const std::string& handle) override {
    call<bool>([](result<bool>) {}, [handle](auto& c, auto cb) {
      auto req = c.master.closeSessionRequest();
      req.setHandle(handle);
      return req.send().then([cb](auto) mutable { (*cb)(true); });
    });
  }

  template <class T, class Make> void call(callback<T> done, Make make) {
    auto cb = std::make_shared<once<result<T>>>(std::move(done));
    auto ep = ep_;
    std::string address = address_;
    // If the loop has stopped, the task is dropped and the last release of `cb` answers.
    ep_->post([ep, address, cb, make = std::move(make)]() mutable {
      ep->loop->with_rpc(
          address, [make = std::move(make), cb](auto& conn) mutable { return make(conn, cb); },
          [cb](runnel::status s) { (*cb)(s); });
    });
  }

private:
  std::shared_ptr<endpoint::impl> ep_;
  std::string address_;
};

} // namespace

// ---- the loop thread -------------------------------------------------------------------------

void endpoint::impl::run_loop(std::promise<status>& started) {
  kj::Own<loop_state> state;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() { state = kj::heap<loop_state>(*this); })) {
    started.set_value(internal_error("cannot start the network loop: " +
                                     to_std(e->getDescription())));
    return;
  }
  loop = state.get();
  auto& ws = state->io.waitScope;
  if (!options.listen.empty()) {
    auto split = cluster_spec::split_address(options.listen);
    if (!split) {
      loop = nullptr;
      started.set_value(split.error());
      return;
    }
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
                  auto addr = state->io.provider->getNetwork()
                                  .parseAddress(split->first, uint(split->second))
                                  .wait(ws);
                  state->listener = addr->listen();
                  port = int(state->listener->getPort());
                })) {
      loop = nullptr;
      state = nullptr;
      started.set_value(unavailable("cannot listen on " + options.listen + ": " +
                                    to_std(e->getDescription())));
      return;
    }
    state->tasks.add(state->accept_loop());
  }
  auto stop = kj::newPromiseAndFulfiller<void>();
  auto* stop_fulfiller = stop.fulfiller.get();
  stop_task = [stop_fulfiller]() { stop_fulfiller->fulfill(); }; // the destructor posts it
  state->tasks.add(state->drain());
  started.set_value(status());
  stop.promise.wait(ws);
  // Tear down on this thread: the tasks first (pending calls' callbacks get `cancelled`), then
  // the connections, then the event loop (loop_state's members are ordered for that).
  state = nullptr;
  loop = nullptr;
}

endpoint::endpoint(std::shared_ptr<impl> i) : impl_(std::move(i)) {}

result<std::unique_ptr<endpoint>> endpoint::start(endpoint_options options) {
  auto i = std::make_shared<impl>();
  i->options = std::move(options);
  if (i->options.auth_token.size() > max_token_bytes)
    return invalid_argument("auth token of " + std::to_string(i->options.auth_token.size()) +
                            " bytes (at most " + std::to_string(max_token_bytes) + ")");
  if (i->options.chunk_bytes == 0)
    i->options.chunk_bytes = uint64_t(512) << 20;
  i->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (i->wake_fd < 0)
    return internal_error("eventfd failed: " + std::string(std::strerror(errno)));
  std::promise<status> started;
  auto ready = started.get_future();
  auto* raw = i.get();
  i->thread = std::thread([raw, &started] { raw->run_loop(started); });
  status s = ready.get();
  if (!s.ok()) {
    i->thread.join();
    return s;
  }
  return std::unique_ptr<endpoint>(new endpoint(std::move(i)));
}

endpoint::~endpoint() {
  impl_->post(impl_->stop_task);
  impl_->thread.join();
  std::deque<std::function<void()>> left;
  {
    std::lock_guard lock(impl_->mailbox_mu);
    impl_->stopping = true;
    left.swap(impl_->mailbox);
  }
  left.clear(); // tasks never run: their callbacks answer `cancelled` as they are released
}

int endpoint::port() const {
  return impl_->port.load();
}

std::shared_ptr<remote_worker> endpoint::worker(const std::string& address) {
  return std::make_shared<remote_worker_impl>(impl_, address);
}

std::shared_ptr<remote_master> endpoint::master(const std::string& address) {
  return std::make_shared<remote_master_impl>(impl_, address);
}

void endpoint::send_tensor(const std::string& address, int64_t step, const std::string& key,
                           tensor value, send_options options, std::function<void(status)> done) {
  auto* i = impl_.get();
  auto cb = std::make_shared<once<status>>(std::move(done));
  i->post([i, address, step, key, value = std::move(value), options, cb]() mutable {
    i->loop->send_tensor(address, step, key, std::move(value), options,
                         [cb](status s) { (*cb)(std::move(s)); });
  });
}

void endpoint::forget_peer(const std::string& address) {
  auto* i = impl_.get();
  i->post([i, address] { i->loop->forget(address); });
}

const endpoint_stats& endpoint::stats() const {
  return impl_->stats;
}

status send_raw_bytes(const std::string& address, const std::string& bytes) {
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
                auto io = kj::setupAsyncIo();
                auto split = cluster_spec::split_address(address).value();
                auto addr = io.provider->getNetwork()
                                .parseAddress(split.first, uint(split.second))
                                .wait(io.waitScope);
                auto stream = addr->connect().wait(io.waitScope);
                stream->write(bytes.data(), bytes.size()).wait(io.waitScope);
                // Read what the node answers (if anything) until it closes; a node closing on
                // unread garbage resets the connection, which is no failure to send.
                char buf[64];
                kj::runCatchingExceptions([&]() {
                  while (stream->tryRead(buf, 1, sizeof buf).wait(io.waitScope) > 0) {
                  }
                });
              })) {
    return unavailable("sending raw bytes to " + address + ": " + to_std(e->getDescription()));
  }
  return {};
}

} // namespace runnel::net
