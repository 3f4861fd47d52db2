#pragma once
// A best-fit allocator with coalescing (TensorFlow's BFC design) over large regions that a
// `sub_allocator` provides: cudaMalloc on a GPU, cudaHostAlloc for pinned staging buffers, plain
// host memory in tests. The bookkeeping is device-independent, so the host tests check it.
//
//   bfc_allocator gpu0(std::make_unique<cuda_sub_allocator>(0), {.memory_limit = 8ull << 30,
//                                                                .name = "GPU:0"});
//   auto p = gpu0.allocate(bytes, "dense/MatMul");   // resource_exhausted names the node
//   gpu0.deallocate(*p);
//   gpu0.stats().bytes_in_use;
//
// Requests are rounded up to 256 bytes. Free chunks sit in 21 bins by size (bin i: at least
// 256·2^i bytes) ordered by (size, address); an allocation takes the smallest free chunk that
// fits, split when it is at least twice the request. A freed chunk merges with free neighbours
// in its region. When nothing fits, a new region is reserved: the larger of the request and
// the next region size (1 MiB doubling each time), within the memory limit. Thread-safe.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runnel/ops/core/status.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel {

/// Where an allocator's regions come from.
class sub_allocator {
public:
  virtual ~sub_allocator() = default;
  /// `bytes` of memory, or null when the device has no more.
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p, size_t bytes) = 0;
};

/// Host memory from the C++ heap (tests, and a CPU stand-in for device memory).
class host_sub_allocator : public sub_allocator {
public:
  void* alloc(size_t bytes) override;
  void free(void* p, size_t bytes) override;
};

struct bfc_options {
  /// The most bytes of regions the allocator reserves (a GPU: its free memory, or less).
  size_t memory_limit = size_t(1) << 30;
  /// The first region's size; each later one doubles it (up to what is left of the limit).
  size_t initial_region_bytes = size_t(1) << 20;
  /// For messages: "GPU:0", "pinned host".
  std::string name = "device";
};

struct bfc_stats {
  size_t bytes_in_use = 0;      ///< requested bytes rounded to 256, of live allocations
  size_t peak_bytes_in_use = 0;
  size_t bytes_reserved = 0;    ///< regions obtained from the sub-allocator
  size_t bytes_limit = 0;
  int64_t num_allocs = 0;       ///< allocations made so far
  int64_t live_allocs = 0;
  size_t largest_alloc = 0;
  size_t largest_free_chunk = 0;
  int64_t regions = 0;
  std::string to_string() const;
};

class bfc_allocator {
public:
  static constexpr size_t min_bytes = 256;
  static constexpr int num_bins = 21;

  bfc_allocator(std::unique_ptr<sub_allocator> sub, bfc_options options);
  ~bfc_allocator();
  bfc_allocator(const bfc_allocator&) = delete;
  bfc_allocator& operator=(const bfc_allocator&) = delete;

  /// `bytes` (at least 1) aligned to 256; `for_node` is named in the error when the limit is hit.
  result<void*> allocate(size_t bytes, const std::string& for_node = {});
  /// Gives back a pointer from allocate; an unknown pointer is an error (nothing changes).
  status deallocate(void* p);
  /// The rounded size of a live allocation (0 for an unknown pointer).
  size_t allocated_size(const void* p) const;
  bfc_stats stats() const;
  /// Starts a new peak: peak_bytes_in_use becomes what is in use now (a step's peak is read
  /// after warm-up steps, as PyTorch's reset_peak_memory_stats).
  void reset_peak();
  /// Internal consistency (chunks tile each region, bins hold exactly the free chunks, no two
  /// adjacent free chunks): for tests; an error says what is wrong.
  status check_invariants() const;

private:
  struct chunk {
    char* ptr = nullptr;
    size_t size = 0;
    bool in_use = false;
    int prev = -1, next = -1; // neighbours in the region, by address
    int region = -1;
  };
  struct region {
    char* base;
    size_t bytes;
  };
  using bin_key = std::pair<size_t, const char*>; // (size, address)

  static int bin_of(size_t bytes);
  int new_chunk();
  void insert_free(int c);
  void remove_free(int c);
  int split(int c, size_t bytes);
  int merge(int left, int right);
  bool extend(size_t bytes);
  int find_fit(size_t bytes);

  std::unique_ptr<sub_allocator> sub_;
  bfc_options options_;
  mutable std::mutex mu_;
  std::vector<chunk> chunks_;
  std::vector<int> free_chunk_ids_;
  std::vector<region> regions_;
  std::set<bin_key> bins_[num_bins];
  std::unordered_map<const char*, int> by_ptr_; // every chunk's start
  size_t next_region_bytes_;
  bfc_stats stats_;
};

/// An uninitialised tensor in `allocator`'s memory, labelled as GPU `device`'s memory and given
/// back with its last reference; running out is `resource_exhausted` naming `node`.
result<tensor> allocate_device_tensor(bfc_allocator& allocator, dtype t, const shape& s,
                                      const std::string& node, int device);

} // namespace runnel
