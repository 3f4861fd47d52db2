#pragma once
// Tensors: a dtype, a shape and a ref-counted, 64-byte aligned buffer.
//
//   tensor t(dtype::f32, shape{2, 3});                  // uninitialised storage
//   auto m = tensor::from_values<float>({2, 2}, {1, 2, 3, 4});
//   float* p = m.data<float>();                          // or m.flat<float>()[i]
//   tensor row = m.slice(1, 2);                          // zero-copy view of row 1
//   std::cout << m;                                      // float32[2,2] [[1, 2], [3, 4]]
//
// Copying a tensor copies a pointer and bumps the buffer's reference count; the data is never
// copied. Tensors are treated as immutable once handed to the runtime: a kernel may write into an
// input buffer only when `is_unique()` says nobody else holds it.
// Eigen access (TensorMap) lives in ops/core/eigen_access.hpp, to keep Eigen out of this header.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "runnel/ops/core/dtype.hpp"
#include "runnel/ops/core/shape.hpp"
#include "runnel/ops/core/status.hpp"

namespace runnel {

/// Where a buffer's bytes live. Host code reads only host and pinned host memory; device
/// memory reaches the host through a transfer (Send/Recv), never by a pointer.
enum class memory_space : uint8_t { host, pinned_host, device };

/// A ref-counted block of memory aligned to 64 bytes. Large blocks are recycled through a
/// bounded cache so big tensors do not pay for fresh pages on every step.
class buffer {
public:
  static constexpr size_t alignment = 64;

  /// Allocates `bytes` (constructs std::string elements when `t` is string).
  static buffer* allocate(dtype t, size_t count);
  /// Wraps memory owned elsewhere; `release(context)` runs when the last reference goes.
  static buffer* wrap(void* data, size_t bytes, void (*release)(void*), void* context,
                      memory_space space = memory_space::host, int device = -1);

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  /// Like wrap, for memory its owner may still read and write (a NumPy array fed from Python):
  /// never unique, so no kernel writes it in place, and state that keeps it copies it.
  static buffer* borrow(void* data, size_t bytes, void (*release)(void*), void* context);
  /// Like wrap, for memory its owner wants back soon (a payload lent from a shared-memory ring):
  /// kernels may write it in place, but state that keeps it copies it.
  static buffer* on_loan(void* data, size_t bytes, void (*release)(void*), void* context);

  void ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void unref();
  bool is_unique() const { return !borrowed_ && refs_.load(std::memory_order_acquire) == 1; }
  bool borrowed() const { return borrowed_; }
  bool on_loan() const { return on_loan_; }
  memory_space space() const { return space_; }
  /// The GPU of device memory (-1 for host memory).
  int device() const { return device_; }

private:
  buffer() = default;
  std::atomic<int32_t> refs_{1};
  dtype type_ = dtype::invalid;
  bool borrowed_ = false; // in the padding: the header stays 64 bytes
  bool on_loan_ = false;
  size_t count_ = 0;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  size_t block_bytes_ = 0;
  void (*release_)(void*) = nullptr;
  void* context_ = nullptr;
  memory_space space_ = memory_space::host;
  int device_ = -1;
};

/// Bytes currently held by the large-block cache and the most it keeps.
struct buffer_cache_stats {
  size_t cached_bytes;
  size_t limit_bytes;
};
buffer_cache_stats buffer_cache_statistics();

/// Bytes of tensor buffers alive in the process now, and the most alive at once since the last
/// reset_tensor_memory_peak() (what a step's peak memory is measured with).
struct tensor_memory_stats {
  int64_t live_bytes;
  int64_t peak_bytes;
};
tensor_memory_stats tensor_memory_statistics();
/// Starts a new peak from the bytes alive now.
void reset_tensor_memory_peak();

class tensor {
public:
  /// An empty tensor (dtype invalid); used for control edges.
  tensor() = default;
  /// Allocates storage for `s` (which must be fully defined); numbers are uninitialised,
  /// strings empty.
  tensor(dtype t, runnel::shape s);
  tensor(const tensor& o) : type_(o.type_), shape_(o.shape_), buf_(o.buf_), offset_(o.offset_) {
    if (buf_)
      buf_->ref();
  }
  tensor(tensor&& o) noexcept
      : type_(o.type_), shape_(std::move(o.shape_)), buf_(o.buf_), offset_(o.offset_) {
    o.buf_ = nullptr;
    o.type_ = dtype::invalid;
  }
  tensor& operator=(const tensor& o) {
    tensor tmp(o);
    swap(tmp);
    return *this;
  }
  tensor& operator=(tensor&& o) noexcept {
    tensor tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~tensor() {
    if (buf_)
      buf_->unref();
  }
  void swap(tensor& o) noexcept {
    std::swap(type_, o.type_);
    std::swap(shape_, o.shape_);
    std::swap(buf_, o.buf_);
    std::swap(offset_, o.offset_);
  }

  /// A rank-0 tensor holding `v`.
  template <class T> static tensor scalar(T v) {
    tensor t(dtype_of<T>, runnel::shape{});
    *t.data<T>() = std::move(v);
    return t;
  }
  /// A tensor of shape `s` holding `values` (row-major); the count must match.
  template <class T> static tensor from_values(runnel::shape s, std::vector<T> values) {
    tensor t(dtype_of<T>, std::move(s));
    throw_if_error(t.check_count(values.size()));
    auto* d = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i)
      d[i] = std::move(values[i]);
    return t;
  }
  /// A rank-1 tensor of `values`.
  template <class T> static tensor vector(std::vector<T> values) {
    auto n = int64_t(values.size());
    return from_values<T>(runnel::shape{n}, std::move(values));
  }
  /// A tensor viewing memory owned elsewhere (zero-copy); `release(context)` frees it. Device
  /// memory (a GPU allocator's) says so with `space` and `device`.
  static tensor wrap(dtype t, runnel::shape s, void* data, void (*release)(void*), void* context,
                     memory_space space = memory_space::host, int device = -1);

  /// A tensor viewing host memory its owner may still change (zero-copy feeds from Python):
  /// kernels never write it in place, and a variable assigned from it keeps a copy.
  static tensor borrow(dtype t, runnel::shape s, void* data, void (*release)(void*), void* context);
  /// Whether the buffer is borrowed (see borrow).
  bool borrowed() const { return buf_ && buf_->borrowed(); }
  /// A tensor viewing memory its owner wants back soon (a payload lent from a shared-memory
  /// ring, net/shm_ring.hpp): kernels may write it in place, but a variable assigned from it
  /// keeps a copy, so the owner does not wait for the variable's next update.
  static tensor on_loan(dtype t, runnel::shape s, void* data, void (*release)(void*),
                        void* context);
  /// Whether the buffer is on loan (see on_loan).
  bool is_on_loan() const { return buf_ && buf_->on_loan(); }
  /// Whether state that keeps this tensor must keep a copy instead (borrowed or on loan).
  bool keep_a_copy() const { return borrowed() || is_on_loan(); }

  bool valid() const { return type_ != dtype::invalid; }
  dtype type() const { return type_; }
  const runnel::shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t num_elements() const { return valid() ? shape_.num_elements() : 0; }
  size_t bytes() const { return size_t(num_elements()) * size_of(type_); }

  void* raw_data() const { return buf_ ? static_cast<char*>(buf_->data()) + offset_ : nullptr; }
  template <class T> T* data() const { return static_cast<T*>(raw_data()); }
  template <class T> std::span<T> flat() const { return {data<T>(), size_t(num_elements())}; }
  /// Rows [begin, end) of the first dimension, sharing this tensor's buffer.
  tensor slice(int64_t begin, int64_t end) const;
  /// The same buffer under another shape with the same number of elements.
  result<tensor> reshaped(runnel::shape s) const;
  /// True when no other tensor shares the buffer (so it may be written in place).
  bool is_unique() const { return buf_ && buf_->is_unique(); }
  bool shares_buffer_with(const tensor& o) const { return buf_ && buf_ == o.buf_; }
  /// A deep copy with its own buffer; a tensor in device memory is an error (thrown).
  tensor copy() const;
  memory_space memory() const { return buf_ ? buf_->space() : memory_space::host; }
  /// Whether host code may read the elements (host or pinned host memory).
  bool host_readable() const { return memory() != memory_space::device; }
  /// The GPU whose memory holds the elements (its CUDA id; -1 for host memory).
  int device_id() const { return buf_ ? buf_->device() : -1; }
  /// "GPU:0 memory" or "host memory", for messages.
  std::string memory_name() const;

  /// "float32[2,2] [[1, 2], [3, 4]]", eliding the middle past `max_elements` per dimension.
  std::string to_string(int64_t max_elements = 6) const;
  /// Values only, as in to_string.
  std::string values_to_string(int64_t max_elements = 6) const;

private:
  status check_count(size_t n) const;
  dtype type_ = dtype::invalid;
  runnel::shape shape_;
  buffer* buf_ = nullptr;
  size_t offset_ = 0;
};

std::ostream& operator<<(std::ostream& os, const tensor& t);

/// Same dtype, shape and values (NaN equal to NaN); false for tensors in device memory.
bool equal(const tensor& a, const tensor& b);
/// Same dtype and shape, floats within `atol + rtol * |b|`.
bool all_close(const tensor& a, const tensor& b, double rtol = 1e-5, double atol = 1e-8);

/// Element `i` as a double (numeric and bool tensors).
double element_as_double(const tensor& t, int64_t i);
/// Reads a rank-0 or rank-1 integer tensor (i32 or i64) as int64 values.
result<std::vector<int64_t>> to_int64_vector(const tensor& t);
/// A reduction's axes (negative ones count from the end) as a flag per dimension of a rank
/// `rank` input; an axis out of range is an error naming it.
result<std::vector<bool>> reduction_axes(const tensor& axes, int rank);

} // namespace runnel
