#pragma once
// Tensor payloads through shared memory between two processes on one host (docs/cluster.md,
// "Shared memory on one host"): the sender of a data connection to a loopback address offers a
// ring (a memfd of its own) in the handshake; the receiver maps it by /proc/<pid>/fd/<fd> and
// says whether it could. Then a frame's payload may sit in the ring instead of following its
// header on the socket: the sender copies it in, the header names where, and the receiver copies
// it out into the new tensor, or (a floating-point payload) lends it: the tensor views the ring
// in place and releases its bytes when its last reference goes. The sender learns what it may
// reuse from one counter in the ring's first page, written by the receiver: the end of the
// longest run of payloads, from the oldest, that are all released (released out of order, they
// are reused in order).
//
//   auto ring = net::shm_ring::create(32 << 20);               // sender
//   if (auto pos = ring->put(pieces, total)) header.shm_pos = *pos;
//   auto view = net::shm_view::open(offer);                    // receiver (in the handshake)
//   view->take(pos, bytes, tensor.raw_data());                 // a copy, released at once
//   tensor t = view->lend(pos, dtype::f32, shape).value();     // in place, released with t

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runnel/ops/core/status.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel::net {

/// What a sender offers in the handshake (16 bytes on the wire, little-endian).
struct shm_offer {
  uint32_t pid = 0;
  int32_t fd = -1;
  uint64_t id = 0; ///< random: the receiver checks the ring it mapped is this one
  std::string encode() const;
  static shm_offer decode(const uint8_t* bytes);
};
constexpr size_t shm_offer_bytes = 16;

/// The sender's side: a ring it writes payloads into. Not thread-safe (the event loop owns it).
class shm_ring {
public:
  /// A ring of `bytes` (null when shared memory is not available here).
  static std::unique_ptr<shm_ring> create(uint64_t bytes);
  ~shm_ring();
  shm_ring(const shm_ring&) = delete;
  shm_ring& operator=(const shm_ring&) = delete;
  shm_offer offer() const { return offer_; }
  /// Copies `total` bytes from `pieces` into the ring; their position, or nothing when the ring
  /// has no room now (the payload then goes on the socket).
  std::optional<uint64_t> put(const std::vector<std::pair<const void*, size_t>>& pieces,
                              uint64_t total);

private:
  shm_ring() = default;
  shm_offer offer_;
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0; ///< of the data area
  uint64_t head_ = 0; ///< where the next payload may start (a running count, not an offset)
  /// Where the bytes the sender may reuse begin (a running count): the receiver's counter, moved
  /// past the lap ends skipped (`skips_`) once everything before them is released.
  uint64_t reusable_from();
  uint64_t floor_ = 0;
  std::deque<std::pair<uint64_t, uint64_t>> skips_; ///< (from, to) a lap end skipped
};

/// The receiver's side: a sender's ring, mapped. Thread-safe: lent tensors release their bytes
/// from any thread, and keep the mapping alive until the last of them goes.
class shm_view : public std::enable_shared_from_this<shm_view> {
public:
  /// Maps the ring `o` names; an error says why not (the sender then uses the socket only). The
  /// ring must be sealed against shrinking: a sender that could shrink it would make reading a
  /// lent tensor fault.
  static result<std::shared_ptr<shm_view>> open(const shm_offer& o);
  ~shm_view();
  shm_view(const shm_view&) = delete;
  shm_view& operator=(const shm_view&) = delete;
  /// Copies the `bytes` at running position `pos` to `out` and releases them; an error when the
  /// position lies outside the ring or before a payload taken earlier.
  status take(uint64_t pos, uint64_t bytes, void* out);
  /// A tensor of `type` and `s` viewing the payload at `pos` in place, its bytes released when
  /// the tensor's last reference goes. Only for floating-point types (kernels only compute with
  /// their values, so a sender that rewrote them later could do no more than send others) —
  /// anything else is an error, as for take.
  result<tensor> lend(uint64_t pos, dtype type, const shape& s);
  /// Payloads taken or lent whose bytes the sender may not reuse yet.
  size_t held() const;

private:
  shm_view() = default;
  status inside(uint64_t pos, uint64_t bytes) const;
  /// Records the payload at `pos` as taken (positions must go forward), and as released at once
  /// or when release(pos) comes; publishes what the sender may reuse.
  status claim(uint64_t pos, uint64_t bytes, bool released);
  void release(uint64_t pos);
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_ = 0;
  mutable std::mutex mu_;
  uint64_t next_ = 0; ///< where the last payload taken ended: positions only go forward
  /// Payloads not yet reusable, by position: their end, and whether their tensor has gone.
  std::map<uint64_t, std::pair<uint64_t, bool>> held_;
};
} // namespace runnel::net
