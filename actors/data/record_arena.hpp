#pragma once
// Memory for the records a shuffle window holds (actors/data/, private). Records are copied in
// once, when read, and freed in random order as the shuffle emits them; the parse stages then
// read them back in that random order. Slots of a few size classes are carved from 2 MiB blocks
// the kernel may back with huge pages, so a window of thousands of records costs few TLB
// entries (with 4 KiB pages, every record read back missed the TLB, which a VM's nested page
// walk makes dear). Freed slots are reused by records of the same class; when the arena is
// destroyed its blocks are kept (up to 64 MiB in all) for the next arena, whose first touches
// of fresh memory would otherwise fault and zero every page.
//
//   record_arena arena;
//   char* p = arena.allocate(n);    // copy n bytes in
//   arena.release(p, n);            // the same n
//
// Not thread-safe: one thread allocates and releases (others may read a slot in between).
#include <cstddef>
#include <memory>
#include <unordered_set>
#include <vector>

namespace runnel {

class record_arena {
public:
  record_arena() = default;
  record_arena(const record_arena&) = delete;
  record_arena& operator=(const record_arena&) = delete;
  record_arena(record_arena&&) noexcept = default;
  record_arena& operator=(record_arena&&) = delete;
  ~record_arena();

  /// A slot of at least `n` bytes.
  char* allocate(size_t n);
  /// Gives back a slot `allocate(n)` returned.
  void release(char* p, size_t n);
  /// Bytes taken from the system (blocks and large records).
  size_t reserved_bytes() const { return reserved_; }

private:
  struct block_deleter {
    void operator()(char* p) const;
  };
  std::vector<std::unique_ptr<char, block_deleter>> blocks_;
  std::unordered_set<char*> large_;      // allocations of their own, freed with the arena
  std::vector<std::vector<char*>> free_; // by size class
  char* bump_ = nullptr;                 // the rest of the newest block
  size_t bump_left_ = 0;
  size_t reserved_ = 0;
};

} // namespace runnel
