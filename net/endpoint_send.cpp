// The data plane's sending side: a connection per receiving address (offering a shared-memory
// ring when the address is on this host), frames written in priority order on a chain, a frame
// resent once on a fresh connection when the old one turns out dead, payloads through the ring
// while it has room (docs/cluster.md).
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <limits>

#include "runnel/net/endpoint_impl.hpp"

namespace runnel::net {

using namespace detail;

kj::Promise<endpoint::impl::loop_state::data_peer*>
endpoint::impl::loop_state::data_to(const std::string& address) {
  auto& slot = data_peers[address];
  if (!slot)
    slot = kj::heap<data_peer>();
  data_peer* peer = slot.get();
  if (peer->stream && !peer->broken)
    return peer;
  KJ_IF_MAYBE (c, peer->connecting) {
    return c->addBranch().then([this, address]() { return data_to(address); });
  }
  std::shared_ptr<shm_ring> ring;
  if (ring_wanted(address))
    ring = shm_ring::create(ep.options.shm_ring_bytes);
  auto mapped = ring ? std::make_shared<uint8_t>(0) : nullptr;
  auto opening = ring ? open(address, conn_kind::data_shm, ring->offer().encode(), mapped)
                      : open(address, conn_kind::data);
  auto fork =
      kj::mv(opening)
          .then(
              [this, peer, ring, mapped](kj::Own<kj::AsyncIoStream> stream) {
                peer->ring = ring && *mapped == 1 ? ring : nullptr;
                if (peer->stream) {
                  // Its watches end once its dead peer's reset arrives; the oldest of a
                  // few are long past that.
                  peer->retired.push_back(kj::mv(peer->stream));
                  if (peer->retired.size() > 4)
                    peer->retired.erase(peer->retired.begin());
                }
                peer->stream = kj::mv(stream);
                peer->broken = false;
                // The old chain's links are dropped with it: the frames still waiting for
                // them fail, and their senders resend on this connection.
                for (auto& [order, w] : peer->waiting)
                  w.written->reject(KJ_EXCEPTION(DISCONNECTED, "connection replaced"));
                peer->waiting.clear();
                peer->last = kj::READY_NOW;
                // Keep little unsent data in the kernel (the bytes in flight are not
                // limited): frames wait in `waiting` instead, where the most urgent goes
                // next. Not every stream is a socket (TLS wraps one): best effort.
                int unsent = 256 << 10;
                kj::runCatchingExceptions([&]() {
                  peer->stream->setsockopt(IPPROTO_TCP, TCP_NOTSENT_LOWAT, &unsent, sizeof unsent);
                });
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

std::shared_ptr<endpoint::impl::loop_state::frame>
endpoint::impl::loop_state::make_frame(int64_t step, const std::string& key, tensor value,
                                       send_options opts) {
  auto f = std::make_shared<frame>();
  f->priority = opts.priority;
  const void* data = nullptr;
  frame_header h = frame_header_of(step, key, ep.options.incarnation, value, opts, f->bf16, data);
  auto* payload = static_cast<const kj::byte*>(data);
  f->head = encode_frame_header(h);
  f->header = std::move(h);
  f->value = std::move(value);
  f->pieces.push_back(bytes_of(f->head));
  for (uint64_t off = 0; off < h.payload_bytes; off += ep.options.chunk_bytes)
    f->pieces.push_back(kj::arrayPtr(
        payload + off, std::min<uint64_t>(ep.options.chunk_bytes, h.payload_bytes - off)));
  f->total = f->head.size() + h.payload_bytes;
  return f;
}

// Writes `f` after the frames already queued for `address`. A connection that was open before
// this frame came may be stale (its peer died, maybe restarted, and no write has told us yet):
// if writing on it fails, the frame goes once more on a fresh connection. A receiver drops a
// frame cut short, so nothing arrives twice but for the rare frame that was delivered whole
// before the reset; the rendezvous keeps one value per key.
kj::Promise<void> endpoint::impl::loop_state::write_frame(std::string address,
                                                          std::shared_ptr<frame> f,
                                                          bool may_retry) {
  auto it = data_peers.find(address);
  bool was_open = it != data_peers.end() && it->second->stream && !it->second->broken;
  auto used = std::make_shared<uint64_t>(0); // the generation this write went to
  return data_to(address)
      .then([this, f, used](data_peer* peer) {
        auto gen = peer->generation;
        *used = gen;
        auto written = kj::newPromiseAndFulfiller<void>();
        peer->waiting.emplace(std::make_tuple(gen, f->priority, peer->arrivals++),
                              data_peer::waiting_frame{f, kj::mv(written.fulfiller)});
        // This link of the chain writes the most urgent frame of its generation waiting now
        // (every frame of the generation added a link, so each is written exactly once).
        auto write = kj::mv(peer->last).then([this, peer, gen]() {
          auto it = peer->waiting.lower_bound(
              std::make_tuple(gen, std::numeric_limits<int64_t>::min(), uint64_t(0)));
          KJ_ASSERT(it != peer->waiting.end() && std::get<0>(it->first) == gen);
          auto next = kj::mv(it->second);
          peer->waiting.erase(it);
          auto* done = next.written.get();
          auto lost = [done](kj::Exception&& e) {
            done->reject(kj::cp(e));
            return kj::Promise<void>(kj::mv(e));
          };
          if (peer->broken || peer->generation != gen)
            return lost(KJ_EXCEPTION(DISCONNECTED, "connection lost"));
          auto& pieces = next.f->pieces;
          next.f->shm_head.clear();
          if (peer->ring)
            place_in_ring(*peer, *next.f);
          if (!next.f->shm_head.empty())
            return peer->stream->write(next.f->shm_head.data(), next.f->shm_head.size())
                .then(
                    [next = kj::mv(next)]() mutable -> kj::Promise<void> {
                      next.written->fulfill();
                      return kj::READY_NOW;
                    },
                    [lost, keep = next.f](kj::Exception&& e) { return lost(kj::mv(e)); });
          return peer->stream->write(kj::arrayPtr(pieces.data(), pieces.size()))
              .then(
                  [next = kj::mv(next)]() mutable -> kj::Promise<void> {
                    next.written->fulfill();
                    return kj::READY_NOW;
                  },
                  [lost, keep = next.f](kj::Exception&& e) { return lost(kj::mv(e)); });
        });
        peer->last = write.then([]() {},
                                [peer, gen](kj::Exception&&) {
                                  if (peer->generation == gen)
                                    peer->broken = true;
                                });
        return kj::mv(written.promise);
      })
      .catch_(
          [this, address, f, may_retry, was_open, used](kj::Exception&& e) -> kj::Promise<void> {
            if (!may_retry || !was_open)
              return kj::mv(e);
            debug("resending a frame to " + address +
                  " on a fresh connection after: " + to_std(e.getDescription()));
            // Only the connection this frame failed on is broken: frames queued behind it fail
            // too, after an earlier one may already have opened the fresh connection.
            auto peer = data_peers.find(address);
            if (peer != data_peers.end() && peer->second->generation == *used)
              peer->second->broken = true;
            return write_frame(address, f, false);
          });
}

frame_header detail::frame_header_of(int64_t step, const std::string& key, uint64_t incarnation,
                                     const tensor& value, const send_options& o,
                                     std::vector<uint16_t>& bf16, const void*& payload) {
  frame_header h;
  h.step = step;
  h.key = key;
  h.sender_incarnation = incarnation;
  h.type = value.type();
  h.shape = value.shape();
  payload = nullptr;
  if (value.type() == dtype::string) {
    h.string_value = value;
  } else if (o.bf16 && value.type() == dtype::f32) {
    bf16.resize(size_t(value.num_elements()));
    const uint32_t* bits = static_cast<const uint32_t*>(value.raw_data());
    for (size_t i = 0; i < bf16.size(); ++i)
      bf16[i] = uint16_t(bits[i] >> 16);
    h.bf16 = true;
    payload = bf16.data();
    h.payload_bytes = uint64_t(bf16.size()) * 2;
  } else {
    payload = value.raw_data();
    h.payload_bytes = value.bytes();
  }
  return h;
}

bool endpoint::impl::loop_state::ring_wanted(const std::string& address) const {
  return !tls && ep.options.shm_ring_bytes != 0 && on_this_host(address);
}

void endpoint::impl::loop_state::place_in_ring(data_peer& peer, frame& f) {
  uint64_t payload = f.total - f.head.size();
  if (payload < ep.options.shm_min_payload_bytes)
    return;
  std::vector<std::pair<const void*, size_t>> pieces;
  for (size_t i = 1; i < f.pieces.size(); ++i)
    pieces.emplace_back(f.pieces[i].begin(), f.pieces[i].size());
  auto pos = peer.ring->put(pieces, payload);
  if (!pos) {
    ep.stats.frames_shm_full++;
    return; // no room now: this one goes on the socket
  }
  frame_header h = f.header;
  h.in_shm = true;
  h.shm_pos = *pos;
  f.shm_head = encode_frame_header(h);
  ep.stats.frames_sent_shm++;
}

void endpoint::impl::loop_state::send_tensor(std::string address, int64_t step, std::string key,
                                             tensor value, send_options opts,
                                             std::function<void(status)> done) {
  auto cb = std::make_shared<once<status>>(std::move(done));
  auto f = make_frame(step, key, std::move(value), opts);
  uint64_t total = f->total;
  tasks.add(write_frame(address, std::move(f), true)
                .then(
                    [this, cb, total, address]() {
                      ep.stats.bytes_sent += total;
                      ep.stats.frames_sent++;
                      ep.count_peer(address, 0, total);
                      (*cb)(status());
                    },
                    [cb, peer = describe_peer(ep.options, address)](kj::Exception&& e) {
                      (*cb)(from_exception(e, peer));
                    }));
}

} // namespace runnel::net
