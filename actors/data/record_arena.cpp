#include "runnel/actors/data/record_arena.hpp"

#include <sys/mman.h>

#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace runnel {
namespace {

constexpr size_t block_bytes = size_t(2) << 20;
/// Records above this get an allocation of their own.
constexpr size_t largest_slot = size_t(256) << 10;

/// Size classes: 64-byte steps up to 1 KiB, then eight per doubling (at most 12.5% unused).
size_t size_class(size_t n) {
  if (n <= 1024)
    return n <= 64 ? 0 : (n - 1) / 64;
  int log = std::bit_width(n - 1) - 1; // 2^log < n <= 2^(log+1)
  size_t step = (size_t(1) << log) / 8;
  return 16 + size_t(log - 10) * 8 + ((n - 1) - (size_t(1) << log)) / step;
}

size_t class_bytes(size_t c) {
  if (c < 16)
    return (c + 1) * 64;
  size_t log = 10 + (c - 16) / 8;
  return (size_t(1) << log) + ((c - 16) % 8 + 1) * ((size_t(1) << log) / 8);
}

/// Blocks of arenas that are gone, kept for the next ones (the next epoch's stream): memory
/// fresh from the system costs a fault and the zeroing of its 2 MiB when first touched, ~4% of
/// records_pipeline's time. At most 64 MiB are kept; the cache is never destroyed.
struct block_cache {
  std::mutex mu;
  std::vector<char*> blocks;
};
block_cache& cache() {
  static auto* c = new block_cache;
  return *c;
}

char* take_block() {
  {
    auto& c = cache();
    std::lock_guard lock(c.mu);
    if (!c.blocks.empty()) {
      char* b = c.blocks.back();
      c.blocks.pop_back();
      return b;
    }
  }
  auto* b = static_cast<char*>(std::aligned_alloc(block_bytes, block_bytes));
  if (!b)
    throw std::bad_alloc();
  madvise(b, block_bytes, MADV_HUGEPAGE); // a hint: without it the arena still works
  return b;
}

} // namespace

void record_arena::block_deleter::operator()(char* p) const {
  auto& c = cache();
  std::lock_guard lock(c.mu);
  if (c.blocks.size() < 32)
    c.blocks.push_back(p);
  else
    std::free(p);
}

record_arena::~record_arena() {
  for (char* p : large_)
    std::free(p);
}

char* record_arena::allocate(size_t n) {
  if (n > largest_slot) {
    auto* p = static_cast<char*>(std::malloc(n));
    if (!p)
      throw std::bad_alloc();
    large_.insert(p);
    reserved_ += n;
    return p;
  }
  size_t c = size_class(n);
  if (c < free_.size() && !free_[c].empty()) {
    char* p = free_[c].back();
    free_[c].pop_back();
    return p;
  }
  size_t bytes = class_bytes(c);
  if (bump_left_ < bytes) {
    char* b = take_block();
    blocks_.emplace_back(b);
    reserved_ += block_bytes;
    bump_ = b;
    bump_left_ = block_bytes;
  }
  char* p = bump_;
  bump_ += bytes;
  bump_left_ -= bytes;
  return p;
}

void record_arena::release(char* p, size_t n) {
  if (n > largest_slot) {
    large_.erase(p);
    std::free(p);
    reserved_ -= n;
    return;
  }
  size_t c = size_class(n);
  if (c >= free_.size())
    free_.resize(c + 1);
  free_[c].push_back(p);
}

} // namespace runnel
