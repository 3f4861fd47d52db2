// Frames written by the sending thread (docs/cluster.md, "Frames written by their sender"): to a
// peer on this host, each frame goes on one data connection whose socket the thread that sends
// writes itself, blocking, under the connection's lock: a payload of at least
// shm_min_payload_bytes is copied into the shared-memory ring and only its header written, a
// smaller one follows its header. No event-loop wake-up, no hop to its thread. Frames sent while
// the connection opens wait in it and are written by the loop when it is open. Other hosts, TLS,
// payloads larger than a quarter of the ring and a connection found lost take the loop's way
// (endpoint_send.cpp), which reconnects and reports failures.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>

#include "runnel/net/endpoint_impl.hpp"

namespace runnel::net {

using namespace detail;

endpoint::impl::direct_peer::~direct_peer() {
  if (fd >= 0)
    ::close(fd);
}

namespace {

/// Whether the peer has closed its end (its process exited or it dropped the connection): a
/// write would then vanish without an error, so the first write after a peer's restart would
/// lose its tensor. The receiver never writes on a data connection.
bool hung_up(int fd) {
  char byte;
  ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/// Writes `head` and then `n` bytes at `payload` (blocking).
bool write_all(int fd, const std::string& head, const void* payload, size_t n) {
  iovec parts[2] = {{const_cast<char*>(head.data()), head.size()}, {const_cast<void*>(payload), n}};
  size_t left = head.size() + n;
  iovec* at = parts;
  int count = n > 0 ? 2 : 1;
  while (left > 0) {
    msghdr m{};
    m.msg_iov = at;
    m.msg_iovlen = size_t(count);
    ssize_t w = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    left -= size_t(w);
    for (size_t k = size_t(w); k > 0 && count > 0;) { // skip what went
      size_t step = std::min(k, at->iov_len);
      at->iov_base = static_cast<char*>(at->iov_base) + step;
      at->iov_len -= step;
      k -= step;
      if (at->iov_len == 0) {
        ++at;
        --count;
      }
    }
  }
  return true;
}

} // namespace

bool detail::on_this_host(const std::string& address) {
  auto split = cluster_spec::split_address(address);
  if (!split)
    return false;
  auto& host = split->first;
  return host.rfind("127.", 0) == 0 || host == "localhost" || host == "::1" || host == "[::1]";
}

bool endpoint::impl::direct_wanted(const std::string& address, const tensor& value) const {
  return options.direct_sends && options.tls_cert.empty() &&
         (value.type() == dtype::string || value.bytes() <= options.shm_ring_bytes / 4 ||
          value.bytes() < options.shm_min_payload_bytes) &&
         on_this_host(address);
}

bool endpoint::impl::send_direct(const std::string& address, int64_t step, const std::string& key,
                                 tensor& value, const send_options& o,
                                 std::function<void(status)>& done) {
  if (!direct_wanted(address, value))
    return false;
  std::shared_ptr<direct_peer> peer;
  bool fresh;
  {
    std::lock_guard lock(direct_mu);
    auto [it, added] = direct_peers.try_emplace(address);
    if (added)
      it->second = std::make_shared<direct_peer>();
    peer = it->second;
    fresh = added;
  }
  std::unique_lock lock(peer->mu);
  if (peer->broken)
    return false;
  if (peer->fd < 0) { // opening: the loop writes it once the connection is open
    peer->waiting.push_back(
        {step, key, std::move(value), o, std::make_shared<once<status>>(std::move(done))});
    lock.unlock();
    if (fresh && !post([this, address, peer] { loop->open_direct(address, peer); }))
      fail_waiting(*peer, cancelled("the network endpoint shut down"));
    return true;
  }
  uint64_t wrote = write_direct(address, *peer, step, key, value, o);
  lock.unlock();
  if (wrote == 0)
    return false;
  done(status());
  return true;
}

uint64_t endpoint::impl::write_direct(const std::string& address, direct_peer& peer, int64_t step,
                                      const std::string& key, const tensor& value,
                                      const send_options& o) {
  if (hung_up(peer.fd)) {
    drop_direct(address, peer);
    return 0;
  }
  const void* payload = nullptr;
  std::vector<uint16_t> bf16;
  frame_header h = frame_header_of(step, key, options.incarnation, value, o, bf16, payload);
  if (peer.ring && h.payload_bytes >= options.shm_min_payload_bytes) {
    auto pos = peer.ring->put({{payload, size_t(h.payload_bytes)}}, h.payload_bytes);
    if (pos) {
      h.in_shm = true;
      h.shm_pos = *pos;
    } else {
      stats.frames_shm_full++; // the ring is full: the payload follows its header
    }
  }
  std::string head = encode_frame_header(h);
  // A write cut short leaves a frame its receiver drops when the connection closes, and a ring
  // frame's bytes that nothing refers to: the loop sends the whole frame again.
  if (!write_all(peer.fd, head, h.in_shm ? nullptr : payload,
                 h.in_shm ? 0 : size_t(h.payload_bytes))) {
    drop_direct(address, peer);
    return 0;
  }
  uint64_t total = head.size() + h.payload_bytes;
  stats.bytes_sent += total;
  stats.frames_sent++;
  stats.frames_sent_shm += h.in_shm;
  count_peer(address, 0, total);
  return total;
}

void endpoint::impl::drop_direct(const std::string& address, direct_peer& peer) {
  peer.broken = true;
  forget_direct(address, &peer);
}

void endpoint::impl::forget_direct(const std::string& address, const direct_peer* only) {
  std::lock_guard lock(direct_mu);
  auto it = direct_peers.find(address);
  if (it != direct_peers.end() && (!only || it->second.get() == only))
    direct_peers.erase(it);
}

void endpoint::impl::fail_waiting(direct_peer& peer, const status& s) {
  std::vector<direct_peer::waiting_frame> left;
  {
    std::lock_guard lock(peer.mu);
    peer.broken = true;
    left.swap(peer.waiting);
  }
  for (auto& w : left)
    (*w.done)(s);
}

void endpoint::impl::loop_state::open_direct(const std::string& address,
                                             std::shared_ptr<direct_peer> peer) {
  std::shared_ptr<shm_ring> ring =
      ep.options.shm_ring_bytes > 0 ? shm_ring::create(ep.options.shm_ring_bytes) : nullptr;
  auto mapped = std::make_shared<uint8_t>(0);
  auto opening = ring ? open(address, conn_kind::data_shm, ring->offer().encode(), mapped)
                      : open(address, conn_kind::data);
  tasks.add(kj::mv(opening).then(
      [this, address, peer, ring, mapped](kj::Own<kj::AsyncIoStream> stream) {
        int fd = take_socket(*stream);
        stream = nullptr; // its descriptor closed now: the connection lives on in `fd` only
        // A receiver that stops reading fails a write after this long (the connection is then
        // dropped) rather than holding its sender for ever.
        timeval limit{5, 0};
        if (fd >= 0)
          ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
        flush_waiting(address, *peer, fd, *mapped == 1 ? ring : nullptr);
      },
      [this, address, peer](kj::Exception&&) {
        // Unreachable now: the loop's way reconnects and reports failures to the senders.
        flush_waiting(address, *peer, -1, nullptr);
      }));
}

void endpoint::impl::loop_state::flush_waiting(const std::string& address, direct_peer& peer,
                                               int fd, std::shared_ptr<shm_ring> ring) {
  std::vector<direct_peer::waiting_frame> frames;
  size_t written = 0;
  {
    std::lock_guard lock(peer.mu);
    peer.fd = fd;
    peer.ring = std::move(ring);
    frames.swap(peer.waiting);
    if (fd < 0)
      ep.drop_direct(address, peer);
    // In order; from the first that fails, the loop's way.
    while (written < frames.size() && !peer.broken) {
      auto& w = frames[written];
      if (ep.write_direct(address, peer, w.step, w.key, w.value, w.o) == 0)
        break;
      ++written;
    }
  }
  for (size_t k = 0; k < frames.size(); ++k) {
    auto& w = frames[k];
    if (k < written)
      (*w.done)(status()); // outside the lock: an answer may send the next frame at once
    else
      send_tensor(address, w.step, w.key, std::move(w.value), w.o,
                  [done = w.done](status s) { (*done)(std::move(s)); });
  }
}

} // namespace runnel::net
