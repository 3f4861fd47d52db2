#include "runnel/net/shm_ring.hpp"
#include "runnel/ops/core/stream_copy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <random>

namespace runnel::net {

namespace {

// The ring's first page: magic, id, data size, and (on its own cache line) the running position
// up to which the receiver has taken payloads. The data follows the page.
constexpr uint64_t page = 4096;
constexpr char magic[8] = {'R', 'U', 'N', 'S', 'H', 'M', '0', '1'};
constexpr const char* memfd_name = "runnel-data";

struct ring_head {
  char magic[8];
  uint64_t id;
  uint64_t size;
  uint64_t pad[5];
  uint64_t released; // atomic_ref only
};
static_assert(offsetof(ring_head, released) == 64);

std::atomic_ref<uint64_t> released(uint8_t* base) {
  return std::atomic_ref<uint64_t>(reinterpret_cast<ring_head*>(base)->released);
}

/// Copies `n` bytes into the ring with non-temporal stores where it can. The ring's first pages
/// are reused while the receiver keeps up, so the lines a payload lands on were last read by the
/// receiver's core: an ordinary copy must take each back first, and measured 125 µs for a
/// 1.6 MB payload in ps_training (a hot copy of it: 43 µs; a copy that streams past the caches:
/// 65 µs, and the receiver reads it no slower).
void copy_into_ring(uint8_t* out, const void* from, size_t n) {
  copy_streaming(out, from, n);
  streaming_fence(); // the stores are visible before the header that names them is written
}

} // namespace

std::string shm_offer::encode() const {
  std::string out(shm_offer_bytes, '\0');
  std::memcpy(out.data(), &pid, 4);
  std::memcpy(out.data() + 4, &fd, 4);
  std::memcpy(out.data() + 8, &id, 8);
  return out;
}

shm_offer shm_offer::decode(const uint8_t* bytes) {
  shm_offer o;
  std::memcpy(&o.pid, bytes, 4);
  std::memcpy(&o.fd, bytes + 4, 4);
  std::memcpy(&o.id, bytes + 8, 8);
  return o;
}

std::unique_ptr<shm_ring> shm_ring::create(uint64_t bytes) {
  bytes = (bytes + page - 1) / page * page;
  if (bytes == 0)
    return nullptr;
  int fd = ::memfd_create(memfd_name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return nullptr;
  // Sealed at its size for good: a receiver reads lent tensors in place long after the handshake.
  if (::ftruncate(fd, off_t(page + bytes)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    ::close(fd);
    return nullptr;
  }
  void* m = ::mmap(nullptr, page + bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    ::close(fd);
    return nullptr;
  }
  std::unique_ptr<shm_ring> r(new shm_ring);
  r->base_ = static_cast<uint8_t*>(m);
  r->size_ = bytes;
  r->offer_.pid = uint32_t(::getpid());
  r->offer_.fd = fd;
  std::random_device rd;
  r->offer_.id = (uint64_t(rd()) << 32 | rd()) | 1;
  auto* h = reinterpret_cast<ring_head*>(r->base_);
  std::memcpy(h->magic, magic, 8);
  h->id = r->offer_.id;
  h->size = bytes;
  released(r->base_).store(0, std::memory_order_release);
  return r;
}

shm_ring::~shm_ring() {
  ::munmap(base_, page + size_);
  ::close(offer_.fd);
}

uint64_t shm_ring::reusable_from() {
  // What the receiver released, as a payload's aligned end, and the skipped bytes at a lap's end
  // once it has released everything before them (it never claims them, so its counter stops
  // short of them: without this a payload put after a skip would count them as still held).
  uint64_t taken = (released(base_).load(std::memory_order_acquire) + 63) / 64 * 64;
  floor_ = std::max(floor_, taken);
  while (!skips_.empty() && floor_ >= skips_.front().first) {
    floor_ = std::max(floor_, skips_.front().second);
    skips_.pop_front();
  }
  return floor_;
}

std::optional<uint64_t> shm_ring::put(const std::vector<std::pair<const void*, size_t>>& pieces,
                                      uint64_t total) {
  if (total == 0 || total > size_ / 4)
    return std::nullopt;
  uint64_t taken = reusable_from();
  uint64_t pos = head_;
  // A payload never wraps: it starts the next lap instead. So does one the receiver has caught up
  // with: the ring's first pages are reused while it keeps up, and only as many pages as are in
  // flight at once are ever touched (memory the ring costs only when it is needed).
  bool caught_up = taken == head_;
  if (pos % size_ + total > size_ || (caught_up && pos % size_ != 0)) {
    pos += size_ - pos % size_;
    if (caught_up)
      taken = floor_ = pos; // nothing is held: the skipped bytes are free at once (and it fits)
  }
  if (pos + total - taken > size_)
    return std::nullopt; // the receiver has not taken enough yet
  if (pos != head_ && !caught_up)
    skips_.emplace_back(head_, pos); // free once the receiver has released what comes before
  uint8_t* out = base_ + page + pos % size_;
  for (auto& [p, n] : pieces) {
    copy_into_ring(out, p, n);
    out += n;
  }
  head_ = (pos + total + 63) / 64 * 64;
  return pos;
}

result<std::shared_ptr<shm_view>> shm_view::open(const shm_offer& o) {
  std::string path = "/proc/" + std::to_string(o.pid) + "/fd/" + std::to_string(o.fd);
  char target[64] = {};
  ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  std::string want = std::string("/memfd:") + memfd_name;
  if (n < 0 || std::strncmp(target, want.c_str(), want.size()) != 0)
    return unavailable(path + " is not a Runnel ring" +
                       (n < 0 ? std::string(" (") + std::strerror(errno) + ")" : ""));
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return unavailable("cannot open " + path + ": " + std::strerror(errno));
  if (int seals = ::fcntl(fd, F_GET_SEALS);
      seals < 0 || !(seals & F_SEAL_SHRINK) || !(seals & F_SEAL_SEAL)) {
    ::close(fd);
    return unavailable(path + " is not sealed against shrinking");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) <= page) {
    ::close(fd);
    return unavailable(path + " is too small for a ring");
  }
  uint64_t mapped = uint64_t(st.st_size);
  void* m = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED)
    return unavailable("cannot map " + path + ": " + std::strerror(errno));
  std::shared_ptr<shm_view> v(new shm_view);
  v->base_ = static_cast<uint8_t*>(m);
  v->mapped_ = mapped;
  auto* h = reinterpret_cast<const ring_head*>(v->base_);
  if (std::memcmp(h->magic, magic, 8) != 0 || h->id != o.id || h->size != mapped - page)
    return unavailable(path + " is not the ring offered");
  v->size_ = h->size;
  return v;
}

shm_view::~shm_view() {
  ::munmap(base_, mapped_);
}

status shm_view::inside(uint64_t pos, uint64_t bytes) const {
  if (bytes > size_ || pos % size_ + bytes > size_)
    return invalid_argument("a payload of " + std::to_string(bytes) + " bytes at ring position " +
                            std::to_string(pos) + " lies outside the ring of " +
                            std::to_string(size_) + " bytes");
  return {};
}

status shm_view::claim(uint64_t pos, uint64_t bytes, bool released_now) {
  std::lock_guard lock(mu_);
  if (pos < next_)
    return invalid_argument("a payload at ring position " + std::to_string(pos) +
                            " comes before the end of the previous one at " +
                            std::to_string(next_));
  next_ = pos + bytes;
  if (held_.empty() && released_now)
    released(base_).store(pos + bytes, std::memory_order_release); // nothing older held
  else
    held_.emplace(pos, std::make_pair(pos + bytes, released_now));
  return {};
}

void shm_view::release(uint64_t pos) {
  std::lock_guard lock(mu_);
  auto it = held_.find(pos);
  if (it == held_.end())
    return;
  it->second.second = true;
  uint64_t to = 0;
  while (!held_.empty() && held_.begin()->second.second) {
    to = held_.begin()->second.first;
    held_.erase(held_.begin());
  }
  if (to != 0)
    released(base_).store(to, std::memory_order_release);
}

status shm_view::take(uint64_t pos, uint64_t bytes, void* out) {
  if (auto st = inside(pos, bytes); !st.ok())
    return st;
  std::memcpy(out, base_ + page + pos % size_, bytes); // before the sender may reuse them
  return claim(pos, bytes, true);
}

namespace {
struct lent_bytes {
  std::shared_ptr<shm_view> view;
  uint64_t pos;
};
} // namespace

result<tensor> shm_view::lend(uint64_t pos, dtype type, const shape& s) {
  if (!is_floating(type))
    return invalid_argument("only floating-point payloads are lent from a ring, not " +
                            std::string(name(type)));
  uint64_t bytes = uint64_t(s.num_elements()) * size_of(type);
  if (auto st = inside(pos, bytes); !st.ok())
    return st;
  if (auto st = claim(pos, bytes, false); !st.ok())
    return st;
  auto* ctx = new lent_bytes{shared_from_this(), pos};
  return tensor::on_loan(
      type, s, base_ + page + pos % size_,
      [](void* c) {
        auto* l = static_cast<lent_bytes*>(c);
        l->view->release(l->pos);
        delete l;
      },
      ctx);
}

size_t shm_view::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

} // namespace runnel::net
