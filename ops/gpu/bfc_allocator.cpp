#include "runnel/ops/gpu/bfc_allocator.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>

namespace runnel {
namespace {

size_t round_up(size_t bytes) {
  size_t b = std::max<size_t>(bytes, 1);
  return (b + bfc_allocator::min_bytes - 1) / bfc_allocator::min_bytes * bfc_allocator::min_bytes;
}

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  return buf;
}

} // namespace

void* host_sub_allocator::alloc(size_t bytes) {
  return std::aligned_alloc(bfc_allocator::min_bytes, round_up(bytes));
}

void host_sub_allocator::free(void* p, size_t) {
  std::free(p);
}

std::string bfc_stats::to_string() const {
  return mib(bytes_in_use) + " in use in " + std::to_string(live_allocs) + " allocations (peak " +
         mib(peak_bytes_in_use) + "), " + mib(bytes_reserved) + " reserved in " +
         std::to_string(regions) + " regions of a " + mib(bytes_limit) +
         " limit, largest free chunk " + mib(largest_free_chunk);
}

bfc_allocator::bfc_allocator(std::unique_ptr<sub_allocator> sub, bfc_options options)
    : sub_(std::move(sub)), options_(std::move(options)),
      next_region_bytes_(round_up(options_.initial_region_bytes)) {
  stats_.bytes_limit = options_.memory_limit;
}

bfc_allocator::~bfc_allocator() {
  for (auto& r : regions_)
    sub_->free(r.base, r.bytes);
}

int bfc_allocator::bin_of(size_t bytes) {
  size_t units = bytes / min_bytes; // >= 1
  int b = int(std::bit_width(units)) - 1;
  return std::min(b, num_bins - 1);
}

int bfc_allocator::new_chunk() {
  if (!free_chunk_ids_.empty()) {
    int id = free_chunk_ids_.back();
    free_chunk_ids_.pop_back();
    chunks_[size_t(id)] = chunk{};
    return id;
  }
  chunks_.emplace_back();
  return int(chunks_.size() - 1);
}

void bfc_allocator::insert_free(int c) {
  auto& ch = chunks_[size_t(c)];
  bins_[bin_of(ch.size)].insert({ch.size, ch.ptr});
}

void bfc_allocator::remove_free(int c) {
  auto& ch = chunks_[size_t(c)];
  bins_[bin_of(ch.size)].erase({ch.size, ch.ptr});
}

// Splits free chunk `c` (not in a bin) into [bytes] + rest; the rest goes into a bin.
int bfc_allocator::split(int c, size_t bytes) {
  int rest = new_chunk();
  auto& ch = chunks_[size_t(c)];
  auto& r = chunks_[size_t(rest)];
  r.ptr = ch.ptr + bytes;
  r.size = ch.size - bytes;
  r.region = ch.region;
  r.prev = c;
  r.next = ch.next;
  if (ch.next >= 0)
    chunks_[size_t(ch.next)].prev = rest;
  ch.next = rest;
  ch.size = bytes;
  by_ptr_[r.ptr] = rest;
  insert_free(rest);
  return c;
}

// Merges `right` into `left` (neighbours, both free and out of the bins); returns left.
int bfc_allocator::merge(int left, int right) {
  auto& l = chunks_[size_t(left)];
  auto& r = chunks_[size_t(right)];
  l.size += r.size;
  l.next = r.next;
  if (r.next >= 0)
    chunks_[size_t(r.next)].prev = left;
  by_ptr_.erase(r.ptr);
  r = chunk{};
  free_chunk_ids_.push_back(right);
  return left;
}

bool bfc_allocator::extend(size_t bytes) {
  size_t left = options_.memory_limit - std::min(options_.memory_limit, stats_.bytes_reserved);
  if (bytes > left)
    return false;
  size_t want = std::min(std::max(bytes, next_region_bytes_), left);
  void* p = sub_->alloc(want);
  if (!p && want > bytes) { // the device may have less than the limit says: ask for less
    want = bytes;
    p = sub_->alloc(want);
  }
  if (!p)
    return false;
  regions_.push_back({static_cast<char*>(p), want});
  stats_.bytes_reserved += want;
  stats_.regions = int64_t(regions_.size());
  next_region_bytes_ = std::max(next_region_bytes_, want) * 2;
  int c = new_chunk();
  auto& ch = chunks_[size_t(c)];
  ch.ptr = static_cast<char*>(p);
  ch.size = want;
  ch.region = int(regions_.size() - 1);
  by_ptr_[ch.ptr] = c;
  insert_free(c);
  return true;
}

int bfc_allocator::find_fit(size_t bytes) {
  for (int b = bin_of(bytes); b < num_bins; ++b) {
    auto it = bins_[b].lower_bound({bytes, nullptr});
    if (it != bins_[b].end())
      return by_ptr_.at(it->second);
  }
  return -1;
}

result<void*> bfc_allocator::allocate(size_t bytes, const std::string& for_node) {
  size_t rounded = round_up(bytes);
  std::lock_guard lock(mu_);
  int c = find_fit(rounded);
  if (c < 0 && extend(rounded))
    c = find_fit(rounded);
  if (c < 0) {
    size_t largest = 0;
    for (auto& bin : bins_)
      if (!bin.empty())
        largest = std::max(largest, bin.rbegin()->first);
    stats_.largest_free_chunk = largest;
    return resource_exhausted(
        "out of memory on " + options_.name + " allocating " + std::to_string(bytes) +
        " bytes (" + mib(rounded) + ")" + (for_node.empty() ? "" : " for node '" + for_node + "'") +
        ": " + stats_.to_string());
  }
  remove_free(c);
  if (chunks_[size_t(c)].size >= 2 * rounded)
    split(c, rounded);
  auto& ch = chunks_[size_t(c)];
  ch.in_use = true;
  stats_.bytes_in_use += ch.size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.largest_alloc = std::max(stats_.largest_alloc, ch.size);
  ++stats_.num_allocs;
  ++stats_.live_allocs;
  return static_cast<void*>(ch.ptr);
}

status bfc_allocator::deallocate(void* p) {
  std::lock_guard lock(mu_);
  auto it = by_ptr_.find(static_cast<const char*>(p));
  if (it == by_ptr_.end() || !chunks_[size_t(it->second)].in_use)
    return invalid_argument(options_.name + ": deallocating a pointer this allocator did not "
                                            "hand out (or freed twice)");
  int c = it->second;
  auto& ch = chunks_[size_t(c)];
  ch.in_use = false;
  stats_.bytes_in_use -= ch.size;
  --stats_.live_allocs;
  if (ch.next >= 0 && !chunks_[size_t(ch.next)].in_use) {
    remove_free(ch.next);
    c = merge(c, chunks_[size_t(c)].next);
  }
  int prev = chunks_[size_t(c)].prev;
  if (prev >= 0 && !chunks_[size_t(prev)].in_use) {
    remove_free(prev);
    c = merge(prev, c);
  }
  insert_free(c);
  return {};
}

size_t bfc_allocator::allocated_size(const void* p) const {
  std::lock_guard lock(mu_);
  auto it = by_ptr_.find(static_cast<const char*>(p));
  if (it == by_ptr_.end() || !chunks_[size_t(it->second)].in_use)
    return 0;
  return chunks_[size_t(it->second)].size;
}

void bfc_allocator::reset_peak() {
  std::lock_guard lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

bfc_stats bfc_allocator::stats() const {
  std::lock_guard lock(mu_);
  bfc_stats s = stats_;
  s.largest_free_chunk = 0;
  for (auto& bin : bins_)
    if (!bin.empty())
      s.largest_free_chunk = std::max(s.largest_free_chunk, bin.rbegin()->first);
  return s;
}

status bfc_allocator::check_invariants() const {
  std::lock_guard lock(mu_);
  size_t in_bins = 0, in_use = 0;
  for (auto& bin : bins_)
    in_bins += bin.size();
  size_t free_chunks = 0;
  for (size_t r = 0; r < regions_.size(); ++r) {
    // Walk the region from its first chunk.
    auto it = by_ptr_.find(regions_[r].base);
    if (it == by_ptr_.end())
      return internal_error("region " + std::to_string(r) + " has no chunk at its start");
    size_t covered = 0;
    int prev = -1;
    bool prev_free = false;
    for (int c = it->second; c >= 0; c = chunks_[size_t(c)].next) {
      auto& ch = chunks_[size_t(c)];
      if (ch.prev != prev || ch.region != int(r) || ch.ptr != regions_[r].base + covered)
        return internal_error("region " + std::to_string(r) + ": chunk links are broken");
      if (!ch.in_use) {
        if (prev_free)
          return internal_error("region " + std::to_string(r) + ": two free neighbours");
        if (!bins_[bin_of(ch.size)].count({ch.size, ch.ptr}))
          return internal_error("a free chunk is missing from its bin");
        ++free_chunks;
      } else {
        in_use += ch.size;
      }
      prev_free = !ch.in_use;
      covered += ch.size;
      prev = c;
    }
    if (covered != regions_[r].bytes)
      return internal_error("region " + std::to_string(r) + ": chunks cover " +
                            std::to_string(covered) + " of " + std::to_string(regions_[r].bytes) +
                            " bytes");
  }
  if (free_chunks != in_bins)
    return internal_error("the bins hold " + std::to_string(in_bins) + " chunks, " +
                          std::to_string(free_chunks) + " are free");
  if (in_use != stats_.bytes_in_use)
    return internal_error("bytes in use: counted " + std::to_string(stats_.bytes_in_use) +
                          ", chunks say " + std::to_string(in_use));
  return {};
}

namespace {
struct device_block {
  bfc_allocator* allocator;
  void* ptr;
};
} // namespace

result<tensor> allocate_device_tensor(bfc_allocator& allocator, dtype t, const shape& s,
                                      const std::string& node, int device) {
  if (t == dtype::string)
    return invalid_argument("node '" + node + "': strings cannot live in GPU memory");
  size_t bytes = size_t(std::max<int64_t>(s.num_elements(), 0)) * size_of(t);
  RUNNEL_ASSIGN_OR_RETURN(void* p, allocator.allocate(std::max<size_t>(bytes, 1), node));
  auto* block = new device_block{&allocator, p};
  return tensor::wrap(
      t, s, p,
      [](void* c) {
        auto* b = static_cast<device_block*>(c);
        (void)b->allocator->deallocate(b->ptr);
        delete b;
      },
      block, memory_space::device, device);
}

} // namespace runnel
