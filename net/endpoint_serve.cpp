// The endpoint's serving side: accepting (and going on after accept fails), the handshake under a
// deadline with the token compared in constant time, the limits on connections and calls, idle
// connections closed, and the data plane's receiving side (the RPC services: endpoint_servers.cpp).
#include <netinet/in.h>
#include <arpa/inet.h>

#include "runnel/net/endpoint_impl.hpp"
#include "runnel/net/step_plane.hpp"

namespace runnel::net {

using namespace detail;

namespace {

/// A stream that remembers when it last moved a byte (for the idle timeout). Reads complete in
/// pieces as they arrive, so a slow but live transfer counts as activity.
class watched_stream final : public kj::AsyncIoStream {
public:
  watched_stream(kj::Own<kj::AsyncIoStream> inner, kj::Timer& timer)
      : inner_(kj::mv(inner)), timer_(timer), last_(timer.now()) {}
  kj::TimePoint last() const { return last_; }

  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    return read_some(static_cast<kj::byte*>(buffer), min_bytes, max_bytes, 0);
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_->write(buffer, size).then([this]() { last_ = timer_.now(); });
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_->write(pieces).then([this]() { last_ = timer_.now(); });
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }
  void abortRead() override { inner_->abortRead(); }
  void getpeername(struct sockaddr* addr, uint* length) override {
    inner_->getpeername(addr, length);
  }
  kj::Maybe<int> getFd() const override { return inner_->getFd(); }

private:
  kj::Promise<size_t> read_some(kj::byte* buf, size_t min_bytes, size_t max_bytes, size_t got) {
    if (got >= min_bytes || got == max_bytes)
      return got; // (a read of 0 bytes, e.g. an empty token, must not wait for one)
    return inner_->tryRead(buf + got, 1, max_bytes - got)
        .then([this, buf, min_bytes, max_bytes, got](size_t n) -> kj::Promise<size_t> {
          if (n == 0)
            return got; // end of stream
          last_ = timer_.now();
          if (got + n >= min_bytes)
            return got + n;
          return read_some(buf, min_bytes, max_bytes, got + n);
        });
  }

  kj::Own<kj::AsyncIoStream> inner_;
  kj::Timer& timer_;
  kj::TimePoint last_;
};

std::string peer_host(kj::AsyncIoStream& s) {
  sockaddr_storage sa{};
  uint len = sizeof sa;
  char text[INET6_ADDRSTRLEN] = "unknown";
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
                s.getpeername(reinterpret_cast<sockaddr*>(&sa), &len);
              })) {
    return "unknown";
  }
  if (sa.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&sa)->sin_addr, text, sizeof text);
  else if (sa.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&sa)->sin6_addr, text, sizeof text);
  else if (sa.ss_family == AF_UNIX)
    return "local";
  return text;
}

} // namespace

/// An accepted connection past its handshake.
struct endpoint::impl::loop_state::served {
  loop_state& loop;
  kj::Own<watched_stream> stream;
  std::string peer;
  std::shared_ptr<int> calls = std::make_shared<int>(0); ///< RPC calls in flight
  std::shared_ptr<shm_view> shm; ///< a data connection's sender's ring, when it offered one
  served(loop_state& l, kj::Own<watched_stream> s, std::string p)
      : loop(l), stream(kj::mv(s)), peer(std::move(p)) {
    ++loop.connections_by_peer[peer];
    ++loop.ep.stats.connections_open;
  }
  ~served() {
    --loop.ep.stats.connections_open;
    auto it = loop.connections_by_peer.find(peer);
    if (it != loop.connections_by_peer.end() && --it->second <= 0)
      loop.connections_by_peer.erase(it);
  }
};

void endpoint::impl::loop_state::log_limit(const std::string& line) {
  auto now = std::chrono::steady_clock::now();
  if (now - last_limit_log < std::chrono::seconds(1))
    return;
  last_limit_log = now;
  ep.log(line);
}

// ---- accepting and the handshake -------------------------------------------------------------

kj::Promise<void> endpoint::impl::loop_state::accept_loop() {
  // evalNow: accept() can fail at once (EMFILE is thrown, not a rejected promise), and that must
  // reach the error handler below too.
  return kj::evalNow([this]() { return listener->accept(); }).then(
      [this](kj::Own<kj::AsyncIoStream> stream) {
        if (handshakes_in_progress >= ep.options.max_handshakes) {
          ep.stats.connections_refused_busy++;
          log_limit("closed a new connection at once: " +
                    std::to_string(handshakes_in_progress) +
                    " handshakes already in progress (max_handshakes)");
        } else {
          std::string peer = peer_host(*stream);
          // What an accepted connection sends (calls' replies, a data connection's acks) is
          // small and waited for: the calls' class.
          set_traffic_class(*stream, ep.options.rpc_tos);
          tasks.add(serve(kj::mv(stream), std::move(peer)));
        }
        return accept_loop();
      },
      [this](kj::Exception&& e) -> kj::Promise<void> {
        // Out of descriptors (EMFILE), or the like: say so, wait a little and go on. Giving up
        // here once left a node that never accepted again.
        ep.stats.accept_errors++;
        log_limit("accept failed: " + to_std(e.getDescription()) +
                  " (still accepting; raise the descriptor limit, e.g. LimitNOFILE=)");
        return io.provider->getTimer().afterDelay(100 * kj::MILLISECONDS).then([this]() {
          return accept_loop();
        });
      });
}

namespace {
/// A connection through its handshake: its kind (0: refused) and its stream.
struct handshaken {
  uint8_t kind = 0;
  kj::Own<watched_stream> stream;
  std::shared_ptr<shm_view> shm; ///< the sender's ring, mapped (data_shm connections)
};

bool loopback_host(const std::string& host) {
  return host.rfind("127.", 0) == 0 || host == "::1";
}
} // namespace

kj::Promise<uint8_t> endpoint::impl::loop_state::accept_ring(kj::AsyncIoStream& s,
                                                             std::shared_ptr<shm_view>& into,
                                                             const std::string& peer) {
  auto offer = kj::heapArray<kj::byte>(shm_offer_bytes);
  auto& o = offer;
  return s.read(o.begin(), o.size()).then([this, &s, &into, peer, offer = kj::mv(offer)]() mutable {
    uint8_t mapped = 0;
    // Only a peer on this host can share memory with us (and one behind TLS is not trusted
    // to): a ring offered from elsewhere is not looked at.
    if (!tls && ep.options.shm_ring_bytes > 0 && loopback_host(peer)) {
      auto v = shm_view::open(shm_offer::decode(offer.begin()));
      if (v) {
        into = std::move(v).value();
        mapped = 1;
      } else {
        debug("not using the ring offered by " + peer + ": " + v.error().message());
      }
    }
    auto two = kj::heapArray<kj::byte>({kj::byte(handshake_answer::ok), kj::byte(mapped)});
    auto& t = two;
    return s.write(t.begin(), t.size()).attach(kj::mv(two)).then([]() {
      return uint8_t(conn_kind::data);
    });
  });
}

kj::Promise<void> endpoint::impl::loop_state::serve(kj::Own<kj::AsyncIoStream> raw,
                                                    std::string peer) {
  ++handshakes_in_progress;
  auto& timer = io.provider->getTimer();
  // TLS first (when configured), then the preamble and the token, then the answer: all under
  // handshake_timeout. Yields the connection, its kind 0 when it was refused.
  kj::Promise<kj::Own<kj::AsyncIoStream>> secured =
      tls ? tls->wrapServer(kj::mv(raw)) : kj::Promise<kj::Own<kj::AsyncIoStream>>(kj::mv(raw));
  auto handshake = secured.then([this, &timer, peer](kj::Own<kj::AsyncIoStream> plain) {
    auto conn = kj::heap<handshaken>();
    conn->stream = kj::heap<watched_stream>(kj::mv(plain), timer);
    auto& s = *conn->stream;
    auto* hc = conn.get();
    auto head = kj::heapArray<kj::byte>(preamble_bytes);
    auto& h = head;
    auto answered =
        s.read(h.begin(), preamble_bytes)
            .then([this, &s, hc, head = kj::mv(head), peer]() mutable -> kj::Promise<uint8_t> {
              auto answer = [&s](handshake_answer a, uint8_t kind) {
                auto byte = kj::heap<kj::byte>(kj::byte(a));
                auto& b = *byte;
                return s.write(&b, 1).attach(kj::mv(byte)).then([kind]() { return kind; });
              };
              auto pre = parse_preamble(head.begin());
              if (!pre) {
                ep.stats.connections_rejected++;
                log_limit("rejected a connection from " + peer + ": " + pre.error().message());
                if (pre.error().code() == error_code::failed_precondition) {
                  // Another wire version: say which one this node speaks.
                  auto two = kj::heapArray<kj::byte>(
                      {kj::byte(handshake_answer::bad_version), kj::byte(wire_version)});
                  auto& t = two;
                  return s.write(t.begin(), t.size()).attach(kj::mv(two)).then([]() {
                    return uint8_t(0);
                  });
                }
                return answer(handshake_answer::bad_preamble, 0);
              }
              auto token = kj::heapArray<kj::byte>(pre->token_bytes);
              auto& t = token;
              uint8_t kind = uint8_t(pre->kind);
              return s.read(t.begin(), t.size())
                  .then([this, &s, hc, token = kj::mv(token), kind, peer,
                         answer]() mutable -> kj::Promise<uint8_t> {
                    if (!tokens_equal(token.begin(), token.size(), ep.options.auth_token)) {
                      ep.stats.connections_rejected++;
                      log_limit("rejected a connection from " + peer + ": wrong auth token");
                      return answer(handshake_answer::bad_token, 0);
                    }
                    auto it = connections_by_peer.find(peer);
                    if (it != connections_by_peer.end() &&
                        it->second >= ep.options.max_connections_per_peer) {
                      ep.stats.connections_refused_busy++;
                      log_limit("refused a connection from " + peer + ": it has " +
                                std::to_string(it->second) + " open (max_connections_per_peer)");
                      return answer(handshake_answer::busy, 0);
                    }
                    if (kind == uint8_t(conn_kind::data_shm))
                      return accept_ring(s, hc->shm, peer);
                    return answer(handshake_answer::ok, kind);
                  });
            });
    return answered.then([conn = kj::mv(conn)](uint8_t kind) mutable {
      conn->kind = kind;
      return kj::mv(conn);
    });
  });
  return timer.timeoutAfter(to_kj(ep.options.handshake_timeout), kj::mv(handshake))
      .then(
          [this, peer](kj::Own<handshaken> conn) -> kj::Promise<void> {
            --handshakes_in_progress;
            if (conn->kind == 0)
              return kj::READY_NOW;
            ep.stats.connections_accepted++;
            static const char* const kinds[] = {"", "rpc", "data", "step"};
            debug(std::string("accepted a ") + kinds[conn->kind] + " connection from " + peer);
            auto c = kj::heap<served>(*this, kj::mv(conn->stream), peer);
            c->shm = std::move(conn->shm);
            if (conn->kind == uint8_t(conn_kind::rpc))
              return serve_rpc(kj::mv(c));
            if (conn->kind == uint8_t(conn_kind::step))
              return serve_step(kj::mv(c));
            return serve_data(kj::mv(c));
          },
          [this, peer](kj::Exception&& e) -> kj::Promise<void> {
            // Still in the handshake (the served connection's own failures come below).
            --handshakes_in_progress;
            if (e.getType() == kj::Exception::Type::OVERLOADED ||
                to_std(e.getDescription()).find("timed out") != std::string::npos) {
              ep.stats.handshake_timeouts++;
              log_limit("closed a connection from " + peer + ": no handshake within " +
                        std::to_string(ep.options.handshake_timeout.count()) + " ms");
              return kj::READY_NOW;
            }
            if (tls) {
              // No certificate, one our CA did not sign, or not TLS at all.
              ep.stats.connections_rejected++;
              log_limit("rejected a connection from " + peer + ": TLS handshake failed: " +
                        to_std(e.getDescription()));
              return kj::READY_NOW;
            }
            return kj::mv(e);
          })
      .then([this]() { debug("an accepted connection ended"); }, [this](kj::Exception&& e) {
        debug("an accepted connection failed: " + to_std(e.getDescription()));
        if (e.getType() != kj::Exception::Type::DISCONNECTED)
          ep.log("connection closed: " + to_std(e.getDescription()));
      });
}

kj::Promise<void> endpoint::impl::loop_state::idle_watch(served& c) {
  if (ep.options.idle_timeout.count() <= 0)
    return kj::NEVER_DONE;
  auto& timer = io.provider->getTimer();
  auto idle = to_kj(ep.options.idle_timeout);
  auto every = std::min(idle / 4, 1 * kj::SECONDS);
  if (every < 10 * kj::MILLISECONDS)
    every = 10 * kj::MILLISECONDS;
  return timer.afterDelay(every).then([this, &c, &timer, idle]() -> kj::Promise<void> {
    if (*c.calls == 0 && timer.now() - c.stream->last() >= idle) {
      ep.stats.idle_closed++;
      debug("closing an idle connection from " + c.peer);
      return kj::READY_NOW;
    }
    return idle_watch(c);
  });
}

// ---- the RPC plane ---------------------------------------------------------------------------

kj::Promise<void> endpoint::impl::loop_state::serve_rpc(kj::Own<served> c) {
  struct conn {
    kj::Own<served> s; // destroyed last
    kj::Own<capnp::TwoPartyVatNetwork> network;
    kj::Own<capnp::RpcSystem<capnp::rpc::twoparty::VatId>> rpc;
  };
  auto k = kj::heap<conn>();
  k->s = kj::mv(c);
  k->network = kj::heap<capnp::TwoPartyVatNetwork>(
      *k->s->stream, capnp::rpc::twoparty::Side::SERVER, rpc_options);
  k->rpc = kj::heap<capnp::RpcSystem<capnp::rpc::twoparty::VatId>>(
      capnp::makeRpcServer(*k->network, make_node_server(ep, k->s->calls)));
  auto done = k->network->onDisconnect().exclusiveJoin(idle_watch(*k->s));
  return done.attach(kj::mv(k));
}

// ---- step calls --------------------------------------------------------------------------------

kj::Promise<void> endpoint::impl::loop_state::serve_step(kj::Own<served> c) {
  int fd = tls ? -1 : take_socket(*c->stream);
  if (fd < 0) {
    ep.log("closed a step connection from " + c->peer +
           (tls ? ": step calls go as RPC calls under TLS" : ": its socket cannot be taken"));
    return kj::READY_NOW;
  }
  // kj's copy goes now, so that the loop's poller no longer wakes for this socket; the connection
  // counts against the peer's limit until its thread ends (`c` lives as long).
  c->stream = nullptr;
  auto paf = kj::newPromiseAndFulfiller<void>();
  uint64_t id = ep.next_reply_id++;
  pending_replies.emplace(id, kj::mv(paf.fulfiller));
  auto* epp = &ep;
  ep.steps->serve(fd, c->peer, [epp, id] {
    epp->post([epp, id] {
      auto it = epp->loop->pending_replies.find(id);
      if (it == epp->loop->pending_replies.end())
        return;
      auto f = kj::mv(it->second);
      epp->loop->pending_replies.erase(it);
      f->fulfill();
    });
  });
  return paf.promise.attach(kj::mv(c), kj::defer([epp, id] {
                              if (epp->loop)
                                epp->loop->pending_replies.erase(id);
                            }));
}

// ---- the data plane: receiving ---------------------------------------------------------------

struct endpoint::impl::loop_state::frame_reader {
  kj::Own<served> c;
  uint32_t length = 0;  ///< of the current header
  uint64_t frames = 0;  ///< delivered so far
  frame_header h;
  tensor value;
  /// Bytes read so far into buffers that grow with them (large headers and payloads).
  std::vector<kj::Array<kj::byte>> staged;
  /// Copies the staged bytes to `dst` and frees them.
  void take_staged(void* dst) {
    auto* out = static_cast<kj::byte*>(dst);
    for (auto& piece : staged) {
      std::memcpy(out, piece.begin(), piece.size());
      out += piece.size();
    }
    staged.clear();
  }
};

namespace {
constexpr uint64_t first_staged_bytes = uint64_t(1) << 20;
}

/// Reads `total` bytes into `r.staged` in buffers that grow with what arrived (each as large as
/// everything before it): a peer holds at most about twice what it sent.
static kj::Promise<void> read_staged(kj::AsyncIoStream& s, std::vector<kj::Array<kj::byte>>& out,
                                     uint64_t total, uint64_t got, uint64_t chunk_cap) {
  if (got == total)
    return kj::READY_NOW;
  uint64_t n = std::min({total - got, std::max(first_staged_bytes, got), chunk_cap});
  out.push_back(kj::heapArray<kj::byte>(n));
  auto& piece = out.back();
  return s.read(piece.begin(), n).then([&s, &out, total, got, n, chunk_cap]() {
    return read_staged(s, out, total, got + n, chunk_cap);
  });
}

kj::Promise<void> endpoint::impl::loop_state::serve_data(kj::Own<served> c) {
  auto r = kj::heap<frame_reader>();
  r->c = kj::mv(c);
  auto& rr = *r;
  return read_frames(rr).exclusiveJoin(idle_watch(*rr.c)).attach(kj::mv(r));
}

kj::Promise<void> endpoint::impl::loop_state::read_frames(frame_reader& r) {
  return r.c->stream->tryRead(&r.length, 4, 4).then([this, &r](size_t n) -> kj::Promise<void> {
    if (n == 0)
      return kj::READY_NOW; // the peer closed between frames
    if (n < 4)
      return reject(r, "truncated frame length");
    if (r.length == 0 || r.length % 8 != 0 || r.length > ep.options.max_rpc_message_bytes)
      return reject(r, "header length " + std::to_string(r.length) + " is invalid");
    return read_staged(*r.c->stream, r.staged, r.length, 0, ep.options.chunk_bytes)
        .then([this, &r]() -> kj::Promise<void> {
          auto words = kj::heapArray<capnp::word>(r.length / 8);
          r.take_staged(words.begin());
          auto h = decode_frame_header(words.begin(), r.length,
                                       {.max_payload_bytes = ep.options.max_payload_bytes});
          if (!h)
            return reject(r, h.error().message());
          r.h = std::move(h).value();
          if (r.h.type == dtype::string) {
            r.value = std::move(r.h.string_value);
            return deliver(r);
          }
          return read_payload(r).then([this, &r]() { return deliver(r); });
        });
  });
}

kj::Promise<void> endpoint::impl::loop_state::read_payload(frame_reader& r) {
  uint64_t total = r.h.payload_bytes;
  auto allocate = [&r]() -> status {
    try {
      r.value = tensor(r.h.type, r.h.shape);
      return {};
    } catch (const std::exception& e) {
      return resource_exhausted(std::string("cannot allocate the tensor: ") + e.what());
    }
  };
  if (r.h.in_shm) {
    // The payload is in the sender's ring: viewed in place until the tensor goes (floating
    // point), or copied out and released for the sender to reuse at once.
    if (!r.c->shm)
      return reject(r, "a payload in shared memory on a connection without a ring");
    if (ep.options.shm_lend && !r.h.bf16 && is_floating(r.h.type)) {
      auto t = r.c->shm->lend(r.h.shm_pos, r.h.type, r.h.shape);
      if (!t)
        return reject(r, t.error().message());
      r.value = std::move(t).value();
      ep.stats.frames_received_shm++;
      ep.stats.frames_lent_shm++;
      return kj::READY_NOW;
    }
    if (auto s = allocate(); !s.ok())
      return reject(r, s.message());
    if (auto s = r.c->shm->take(r.h.shm_pos, total, r.value.raw_data()); !s.ok())
      return reject(r, s.message());
    ep.stats.frames_received_shm++;
    return kj::READY_NOW;
  }
  if (total <= ep.options.direct_payload_bytes) {
    // Small enough to allocate on the header's word, and read in place.
    if (auto s = allocate(); !s.ok())
      return reject(r, s.message());
    if (total == 0)
      return kj::READY_NOW;
    return r.c->stream->read(r.value.raw_data(), total);
  }
  return read_staged(*r.c->stream, r.staged, total, 0, ep.options.chunk_bytes)
      .then([this, &r, allocate]() -> kj::Promise<void> {
        if (auto s = allocate(); !s.ok())
          return reject(r, s.message());
        r.take_staged(r.value.raw_data());
        return kj::READY_NOW;
      });
}

kj::Promise<void> endpoint::impl::loop_state::deliver(frame_reader& r) {
  if (!r.value.valid())
    return kj::READY_NOW; // rejected while reading the payload: the connection closes
  if (r.h.bf16) {
    // Widen in place, from the end: element i's 4 bytes cover bf16 elements >= i.
    auto* half = static_cast<const uint16_t*>(r.value.raw_data());
    auto* full = static_cast<uint32_t*>(r.value.raw_data());
    for (int64_t i = r.value.num_elements() - 1; i >= 0; --i)
      full[i] = uint32_t(half[i]) << 16;
  }
  r.frames++;
  ep.stats.frames_received++;
  ep.stats.bytes_received += 4 + r.length + r.h.payload_bytes;
  ep.count_peer(r.c->peer, 4 + r.length + r.h.payload_bytes, 0);
  tensor value = std::move(r.value);
  r.value = tensor();
  if (ep.options.on_tensor)
    ep.options.on_tensor(r.h.step, std::move(r.h.key), std::move(value));
  return read_frames(r);
}

kj::Promise<void> endpoint::impl::loop_state::reject(frame_reader& r, const std::string& why) {
  ep.stats.frames_rejected++;
  r.value = tensor();
  r.staged.clear();
  ep.log("data connection from " + r.c->peer + ": frame " + std::to_string(r.frames) +
         " rejected: " + why + "; closing the connection");
  return kj::READY_NOW;
}

} // namespace runnel::net
