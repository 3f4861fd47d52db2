#include "runnel/ops/core/tensor.hpp"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <ostream>
#include <sstream>

#include <sys/mman.h>

namespace runnel {
namespace {

// Blocks of at least this many bytes are recycled. Fresh large blocks come from mmap (or from a
// heap glibc trimmed) and cost a page fault per 4 KiB on first touch, which costs more than the
// arithmetic of an element-wise op. At 1 MiB, g2p's LSTM tensors of 64-512 KiB still faulted
// ~700 times a step (6% of its samples under the fault handler); from 64 KiB, ~160 times and
// its step 8-10% shorter (perf stat -e page-faults, 2026-12-04).
constexpr size_t large_block = size_t(64) << 10;
constexpr size_t header_bytes = 64; // buffer header, padded so data stays 64-byte aligned
static_assert(sizeof(buffer) <= header_bytes);

class block_cache {
public:
  void* take(size_t bytes, size_t& block_bytes) {
    std::lock_guard lock(mu_);
    auto it = free_.lower_bound(bytes);
    if (it == free_.end() || it->first > bytes + bytes / 4)
      return nullptr;
    void* p = it->second;
    block_bytes = it->first;
    cached_ -= it->first;
    free_.erase(it);
    return p;
  }
  bool give(void* p, size_t block_bytes) {
    std::lock_guard lock(mu_);
    if (cached_ + block_bytes > limit_)
      return false;
    free_.emplace(block_bytes, p);
    cached_ += block_bytes;
    return true;
  }
  buffer_cache_stats stats() {
    std::lock_guard lock(mu_);
    return {cached_, limit_};
  }

private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
  size_t limit_ = size_t(1) << 30;
};

block_cache& cache() {
  static block_cache* c = new block_cache; // never destroyed: buffers may outlive main's statics
  return *c;
}

std::atomic<int64_t> live_bytes{0}, peak_bytes{0};

void count_allocation(int64_t bytes) {
  int64_t now = live_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

// Blocks of at least this many bytes (embedding tables, their optimizer slots) are backed by
// transparent huge pages where the kernel offers them on request: rows read and updated at
// random (a sparse update) then cost a TLB miss per 2 MiB instead of per 4 KiB.
constexpr size_t huge_block = size_t(32) << 20;
constexpr size_t huge_page = size_t(2) << 20;

// The smallest blocks (a scalar's or a short vector's, a wrapped buffer's header) are kept per
// thread for reuse: aligned_alloc takes glibc's slow memalign path for each, which was 7% of a
// trivial Session.run from Python (perf, 2026-12-03). Bounded per size; a block freed on another
// thread than the one that made it joins that thread's list. Not under AddressSanitizer, which
// must see every block freed to find a use after free.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RUNNEL_NO_SMALL_BLOCK_CACHE 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define RUNNEL_NO_SMALL_BLOCK_CACHE 1
#endif
constexpr size_t small_classes = 4; // blocks of 64, 128, 192 and 256 bytes
constexpr int small_cached = 32;    // per size and thread

struct small_blocks {
  void* free[small_classes][small_cached];
  int count[small_classes] = {};
  ~small_blocks();
};
thread_local bool small_blocks_gone = false; // set once the thread's list is destroyed

small_blocks& thread_small_blocks() {
  thread_local small_blocks blocks;
  return blocks;
}

small_blocks::~small_blocks() {
  small_blocks_gone = true;
  for (size_t c = 0; c < small_classes; ++c)
    for (int i = 0; i < count[c]; ++i)
      std::free(free[c][i]);
}

/// The small-block class of a rounded block size, or -1.
int small_class(size_t block_bytes) {
#ifdef RUNNEL_NO_SMALL_BLOCK_CACHE
  (void)block_bytes;
  return -1;
#else
  return block_bytes <= small_classes * buffer::alignment ? int(block_bytes / buffer::alignment) - 1
                                                          : -1;
#endif
}

void* allocate_block(size_t bytes, size_t& block_bytes) {
  if (int c = small_class((bytes + buffer::alignment - 1) / buffer::alignment * buffer::alignment);
      c >= 0 && !small_blocks_gone) {
    auto& cache = thread_small_blocks();
    if (cache.count[c] > 0) {
      block_bytes = size_t(c + 1) * buffer::alignment;
      return cache.free[c][--cache.count[c]];
    }
  }
  if (bytes >= large_block) {
    if (void* p = cache().take(bytes, block_bytes))
      return p;
  }
  size_t align = bytes >= huge_block ? huge_page : buffer::alignment;
  block_bytes = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, block_bytes);
  if (!p)
    throw std::bad_alloc();
  if (align == huge_page)
    ::madvise(p, block_bytes, MADV_HUGEPAGE); // advice only: without THP, small pages serve
  return p;
}

void free_block(void* p, size_t block_bytes) {
  if (int c = small_class(block_bytes); c >= 0 && !small_blocks_gone) {
    auto& cache = thread_small_blocks();
    if (cache.count[c] < small_cached) {
      cache.free[c][cache.count[c]++] = p;
      return;
    }
  }
  if (block_bytes >= large_block && cache().give(p, block_bytes))
    return;
  std::free(p);
}

} // namespace

buffer_cache_stats buffer_cache_statistics() {
  return cache().stats();
}

tensor_memory_stats tensor_memory_statistics() {
  return {live_bytes.load(std::memory_order_relaxed), peak_bytes.load(std::memory_order_relaxed)};
}

void reset_tensor_memory_peak() {
  peak_bytes.store(live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

buffer* buffer::allocate(dtype t, size_t count) {
  size_t bytes = count * size_of(t);
  size_t block_bytes = 0;
  void* block = allocate_block(header_bytes + bytes, block_bytes);
  auto* b = new (block) buffer();
  b->type_ = t;
  b->count_ = count;
  b->data_ = static_cast<char*>(block) + header_bytes;
  b->bytes_ = bytes;
  b->block_bytes_ = block_bytes;
  count_allocation(int64_t(bytes));
  if (t == dtype::string) {
    auto* s = static_cast<std::string*>(b->data_);
    for (size_t i = 0; i < count; ++i)
      new (s + i) std::string();
  }
  return b;
}

buffer* buffer::wrap(void* data, size_t bytes, void (*release)(void*), void* context,
                     memory_space space, int device) {
  size_t block_bytes = 0;
  void* block = allocate_block(header_bytes, block_bytes);
  auto* b = new (block) buffer();
  b->data_ = data;
  b->bytes_ = bytes;
  b->block_bytes_ = block_bytes;
  b->release_ = release;
  b->context_ = context;
  b->space_ = space;
  b->device_ = device;
  return b;
}

buffer* buffer::borrow(void* data, size_t bytes, void (*release)(void*), void* context) {
  buffer* b = wrap(data, bytes, release, context);
  b->borrowed_ = true;
  return b;
}

buffer* buffer::on_loan(void* data, size_t bytes, void (*release)(void*), void* context) {
  buffer* b = wrap(data, bytes, release, context);
  b->on_loan_ = true;
  return b;
}

void buffer::unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1)
    return;
  if (type_ == dtype::string) {
    auto* s = static_cast<std::string*>(data_);
    for (size_t i = 0; i < count_; ++i)
      s[i].~basic_string();
  }
  if (release_)
    release_(context_);
  else
    live_bytes.fetch_sub(int64_t(bytes_), std::memory_order_relaxed);
  size_t block_bytes = block_bytes_;
  this->~buffer();
  free_block(this, block_bytes);
}

tensor::tensor(dtype t, runnel::shape s) : type_(t), shape_(std::move(s)) {
  if (!shape_.is_fully_defined())
    throw error(invalid_argument("cannot allocate a tensor of shape " + shape_.to_string() +
                                 ": the shape must be fully defined"));
  if (t == dtype::invalid)
    throw error(invalid_argument("cannot allocate a tensor of dtype invalid"));
  if (shape_.num_elements() > runnel::shape::max_elements)
    throw error(invalid_argument("cannot allocate a tensor of shape " + shape_.to_string() +
                                 ": more than 2^40 elements"));
  buf_ = buffer::allocate(t, size_t(shape_.num_elements()));
}

tensor tensor::wrap(dtype t, runnel::shape s, void* data, void (*release)(void*), void* context,
                    memory_space space, int device) {
  tensor out;
  out.type_ = t;
  out.shape_ = std::move(s);
  out.buf_ = buffer::wrap(data, out.bytes(), release, context, space, device);
  return out;
}

tensor tensor::borrow(dtype t, runnel::shape s, void* data, void (*release)(void*), void* context) {
  tensor out;
  out.type_ = t;
  out.shape_ = std::move(s);
  out.buf_ = buffer::borrow(data, out.bytes(), release, context);
  return out;
}

tensor tensor::on_loan(dtype t, runnel::shape s, void* data, void (*release)(void*),
                       void* context) {
  tensor out;
  out.type_ = t;
  out.shape_ = std::move(s);
  out.buf_ = buffer::on_loan(data, out.bytes(), release, context);
  return out;
}

std::string tensor::memory_name() const {
  switch (memory()) {
    case memory_space::device:
      return "GPU:" + std::to_string(buf_->device()) + " memory";
    case memory_space::pinned_host:
      return "pinned host memory";
    case memory_space::host:
      break;
  }
  return "host memory";
}

status tensor::check_count(size_t n) const {
  if (int64_t(n) != num_elements())
    return invalid_argument("shape " + shape_.to_string() + " needs " +
                            std::to_string(num_elements()) + " values, got " + std::to_string(n));
  return {};
}

tensor tensor::slice(int64_t begin, int64_t end) const {
  if (rank() < 1 || begin < 0 || end < begin || end > dim(0))
    throw error(invalid_argument("slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                                 ") out of range for shape " + shape_.to_string()));
  tensor out(*this);
  int64_t row = dim(0) == 0 ? 0 : num_elements() / dim(0);
  out.offset_ += size_t(begin * row) * size_of(type_);
  out.shape_.set_dim(0, end - begin);
  return out;
}

result<tensor> tensor::reshaped(runnel::shape s) const {
  if (!s.is_fully_defined() || s.num_elements() != num_elements())
    return invalid_argument("cannot reshape a tensor with " + std::to_string(num_elements()) +
                            " elements (shape " + shape_.to_string() + ") to shape " +
                            s.to_string());
  tensor out(*this);
  out.shape_ = std::move(s);
  return out;
}

tensor tensor::copy() const {
  if (!valid())
    return {};
  if (!host_readable())
    throw error(failed_precondition("cannot copy a " + std::string(name(type_)) +
                                    shape_.to_string() + " tensor in " + memory_name() +
                                    " on the host; transfer it first (Send/Recv)"));
  tensor out(type_, shape_);
  if (type_ == dtype::string) {
    auto src = flat<std::string>();
    auto dst = out.flat<std::string>();
    for (size_t i = 0; i < src.size(); ++i)
      dst[i] = src[i];
  } else if (bytes()) {
    std::memcpy(out.raw_data(), raw_data(), bytes());
  }
  return out;
}

double element_as_double(const tensor& t, int64_t i) {
  return dispatch(t.type(), [&]<class T>() -> double {
    if constexpr (std::is_same_v<T, std::string>)
      return 0.0;
    else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
      return double(float(t.data<T>()[i]));
    else
      return double(t.data<T>()[i]);
  });
}

result<std::vector<int64_t>> to_int64_vector(const tensor& t) {
  if (t.type() != dtype::i32 && t.type() != dtype::i64)
    return invalid_argument("expected an int32 or int64 tensor, got " +
                            std::string(name(t.type())));
  if (t.rank() > 1)
    return invalid_argument("expected a scalar or vector, got shape " + t.shape().to_string());
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.type() == dtype::i32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
  return v;
}

namespace {

void format_element(std::ostream& os, const tensor& t, int64_t i) {
  dispatch(t.type(), [&]<class T>() {
    const T& v = t.data<T>()[i];
    if constexpr (std::is_same_v<T, std::string>)
      os << '"' << v << '"';
    else if constexpr (std::is_same_v<T, bool>)
      os << (v ? "true" : "false");
    else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>)
      os << int(v);
    else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
      os << float(v);
    else
      os << v;
  });
}

void format_dim(std::ostream& os, const tensor& t, int d, int64_t offset, int64_t stride,
                int64_t max) {
  if (d == t.rank()) {
    format_element(os, t, offset);
    return;
  }
  int64_t n = t.dim(d), inner = n == 0 ? 0 : stride / n;
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (n > max && i == max / 2) {
      os << "...";
      i = n - (max - max / 2);
      if (i < n)
        os << ", ";
    }
    format_dim(os, t, d + 1, offset + i * inner, inner, max);
    if (i + 1 < n)
      os << ", ";
  }
  os << ']';
}

} // namespace

std::string tensor::values_to_string(int64_t max_elements) const {
  if (!valid())
    return "<empty>";
  std::ostringstream os;
  os.precision(6);
  format_dim(os, *this, 0, 0, num_elements(), std::max<int64_t>(max_elements, 2));
  return os.str();
}

std::string tensor::to_string(int64_t max_elements) const {
  if (!valid())
    return "<empty tensor>";
  if (!host_readable())
    return std::string(name(type_)) + shape_.to_string() + " <in " + memory_name() + ">";
  return std::string(name(type_)) + shape_.to_string() + " " + values_to_string(max_elements);
}

std::ostream& operator<<(std::ostream& os, const tensor& t) {
  return os << t.to_string();
}

bool equal(const tensor& a, const tensor& b) {
  if (a.type() != b.type() || !(a.shape() == b.shape()) || !a.host_readable() ||
      !b.host_readable())
    return false;
  if (!a.valid())
    return true;
  return dispatch(a.type(), [&]<class T>() {
    auto x = a.flat<T>();
    auto y = b.flat<T>();
    for (size_t i = 0; i < x.size(); ++i) {
      if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
        if (x[i].bits != y[i].bits)
          return false;
      } else if constexpr (std::is_floating_point_v<T>) {
        if (!(x[i] == y[i]) && !(std::isnan(x[i]) && std::isnan(y[i])))
          return false;
      } else if (!(x[i] == y[i])) {
        return false;
      }
    }
    return true;
  });
}

bool all_close(const tensor& a, const tensor& b, double rtol, double atol) {
  if (a.type() != b.type() || !(a.shape() == b.shape()) || !a.host_readable() ||
      !b.host_readable())
    return false;
  if (a.type() == dtype::string)
    return equal(a, b);
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    double x = element_as_double(a, i), y = element_as_double(b, i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y))
        return false;
      continue;
    }
    if (x == y)
      continue;
    if (std::abs(x - y) > atol + rtol * std::abs(y))
      return false;
  }
  return true;
}

result<std::vector<bool>> reduction_axes(const tensor& axes_t, int rank) {
  RUNNEL_ASSIGN_OR_RETURN(auto axes, to_int64_vector(axes_t));
  std::vector<bool> reduce(size_t(rank), false);
  for (auto a : axes) {
    if (a < -rank || a >= rank)
      return invalid_argument("reduction axis " + std::to_string(a) +
                              " is out of range for an input of rank " + std::to_string(rank));
    reduce[size_t(a < 0 ? a + rank : a)] = true;
  }
  return reduce;
}

} // namespace runnel
