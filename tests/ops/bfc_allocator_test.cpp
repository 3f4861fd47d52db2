// The GPU allocator's bookkeeping, driven with host memory.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>

#include "runnel/ops/gpu/bfc_allocator.hpp"

using namespace runnel;

namespace {

/// Host memory that counts what it hands out and can be told to run dry.
class counting_sub_allocator : public host_sub_allocator {
public:
  size_t outstanding = 0, calls = 0, capacity = SIZE_MAX;
  void* alloc(size_t bytes) override {
    ++calls;
    if (outstanding + bytes > capacity)
      return nullptr;
    outstanding += bytes;
    return host_sub_allocator::alloc(bytes);
  }
  void free(void* p, size_t bytes) override {
    outstanding -= bytes;
    host_sub_allocator::free(p, bytes);
  }
};

bfc_allocator make(size_t limit, counting_sub_allocator** sub = nullptr) {
  auto s = std::make_unique<counting_sub_allocator>();
  if (sub)
    *sub = s.get();
  return bfc_allocator(std::move(s), {.memory_limit = limit, .name = "GPU:0"});
}

char* get(bfc_allocator& a, size_t bytes, const std::string& node = "n") {
  auto r = a.allocate(bytes, node);
  REQUIRE(r.ok());
  return static_cast<char*>(*r);
}

} // namespace

TEST_CASE("bfc: sizes round to 256 and a chunk splits only when twice the request", "[gpu_host]") {
  auto a = make(64 << 20);
  char* p = get(a, 1);
  CHECK(a.allocated_size(p) == 256);
  CHECK(reinterpret_cast<uintptr_t>(p) % 256 == 0);
  char* q = get(a, 1000);
  CHECK(a.allocated_size(q) == 1024);
  CHECK(q == p + 256); // best fit: carved from the same region, right after
  REQUIRE(a.check_invariants().ok());
  CHECK(a.stats().bytes_in_use == 1280);
  CHECK(a.stats().regions == 1);
}

TEST_CASE("bfc: freed neighbours coalesce and are reused", "[gpu_host]") {
  auto a = make(64 << 20);
  char* x = get(a, 4096);
  char* y = get(a, 4096);
  char* z = get(a, 4096);
  REQUIRE(a.deallocate(y).ok());
  REQUIRE(a.deallocate(x).ok());
  REQUIRE(a.check_invariants().ok());
  // x and y merged: an 8 KiB request fits exactly where x was, in the same region.
  char* w = get(a, 8192);
  CHECK(w == x);
  CHECK(a.stats().regions == 1);
  REQUIRE(a.deallocate(z).ok());
  REQUIRE(a.deallocate(w).ok());
  REQUIRE(a.check_invariants().ok());
  CHECK(a.stats().bytes_in_use == 0);
  CHECK(a.stats().largest_free_chunk == a.stats().bytes_reserved); // one chunk again
}

TEST_CASE("bfc: regions grow by doubling within the limit", "[gpu_host]") {
  counting_sub_allocator* sub = nullptr;
  auto a = make(8 << 20, &sub);
  get(a, 900 << 10);  // first region: 1 MiB
  get(a, 900 << 10);  // does not fit: a 2 MiB region
  CHECK(a.stats().regions == 2);
  CHECK(a.stats().bytes_reserved == (3 << 20));
  get(a, 3 << 20); // a 4 MiB region
  CHECK(a.stats().bytes_reserved == (7 << 20));
  get(a, 1 << 20);   // the rest of that region
  CHECK(a.stats().regions == 3);
  get(a, 900 << 10); // 8 MiB would pass the limit: what is left (1 MiB) is taken
  CHECK(a.stats().bytes_reserved == (8 << 20));
  CHECK(sub->outstanding == (8 << 20));
  CHECK_FALSE(a.allocate(900 << 10).ok());
  REQUIRE(a.check_invariants().ok());
}

TEST_CASE("bfc: running out names the node, the size and what is in use", "[gpu_host]") {
  auto a = make(4 << 20);
  char* big = get(a, 3 << 20, "layer1/MatMul");
  auto r = a.allocate(2 << 20, "layer2/Conv2D");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::resource_exhausted);
  auto msg = r.error().to_string();
  CHECK_THAT(msg, Catch::Contains("GPU:0") && Catch::Contains("layer2/Conv2D") &&
                      Catch::Contains("2097152 bytes") && Catch::Contains("3.0 MiB in use") &&
                      Catch::Contains("4.0 MiB limit"));
  // Nothing changed: the same request fits once memory is given back.
  REQUIRE(a.check_invariants().ok());
  REQUIRE(a.deallocate(big).ok());
  CHECK(a.allocate(2 << 20, "layer2/Conv2D").ok());
}

TEST_CASE("bfc: a device with less memory than the limit gets a smaller region", "[gpu_host]") {
  counting_sub_allocator* sub = nullptr;
  auto a = make(1 << 30, &sub);
  sub->capacity = 300 << 10; // the device has 300 KiB
  CHECK(a.allocate(200 << 10).ok()); // 1 MiB refused, 200 KiB granted
  CHECK_FALSE(a.allocate(200 << 10).ok());
  REQUIRE(a.check_invariants().ok());
}

TEST_CASE("bfc: bad pointers are refused without harm", "[gpu_host]") {
  auto a = make(1 << 20);
  char* p = get(a, 512);
  int on_stack = 0;
  CHECK_FALSE(a.deallocate(&on_stack).ok());
  CHECK_FALSE(a.deallocate(p + 256).ok()); // inside a chunk, not its start
  REQUIRE(a.deallocate(p).ok());
  CHECK_FALSE(a.deallocate(p).ok()); // twice
  REQUIRE(a.check_invariants().ok());
}

TEST_CASE("bfc: random allocations never overlap and always coalesce back", "[gpu_host]") {
  counting_sub_allocator* sub = nullptr;
  auto a = make(64 << 20, &sub);
  std::mt19937 rng(7);
  std::map<char*, size_t> live; // start -> requested bytes
  for (int i = 0; i < 20000; ++i) {
    bool alloc = live.empty() || rng() % 100 < 55;
    if (alloc) {
      size_t bytes = size_t(1) << (rng() % 17);
      bytes += rng() % bytes;
      auto r = a.allocate(bytes);
      if (!r.ok()) {
        REQUIRE(r.error().code() == error_code::resource_exhausted);
        continue;
      }
      char* p = static_cast<char*>(*r);
      auto next = live.lower_bound(p);
      if (next != live.end())
        REQUIRE(p + bytes <= next->first);
      if (next != live.begin()) {
        auto prev = std::prev(next);
        REQUIRE(prev->first + prev->second <= p);
      }
      std::fill(p, p + bytes, char(i)); // the memory is really ours
      live[p] = bytes;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      REQUIRE(a.deallocate(it->first).ok());
      live.erase(it);
    }
    if (i % 1000 == 0)
      REQUIRE(a.check_invariants().ok());
  }
  for (auto& [p, bytes] : live)
    REQUIRE(a.deallocate(p).ok());
  REQUIRE(a.check_invariants().ok());
  auto s = a.stats();
  CHECK(s.bytes_in_use == 0);
  CHECK(s.live_allocs == 0);
  CHECK(s.peak_bytes_in_use > 0);
  CHECK(sub->outstanding == s.bytes_reserved);
}

TEST_CASE("bfc: a reset peak counts from what is in use then", "[gpu_host]") {
  auto a = make(64 << 20);
  char* big = get(a, 4 << 20);
  char* small = get(a, 1000);
  REQUIRE(a.deallocate(big).ok());
  CHECK(a.stats().peak_bytes_in_use == (4 << 20) + 1024);
  a.reset_peak();
  CHECK(a.stats().peak_bytes_in_use == 1024);
  char* mid = get(a, 2 << 20);
  CHECK(a.stats().peak_bytes_in_use == (2 << 20) + 1024);
  REQUIRE(a.deallocate(mid).ok());
  REQUIRE(a.deallocate(small).ok());
}
