#pragma once
// The dimensions of a shape, stored in place up to `inline_capacity` and on the heap beyond.
// Every tensor carries a shape, and tensors are copied with every message and every bound input:
// a std::vector there cost an allocation per copy. It reads like a const vector and converts to
// one; code that edits dimensions copies them into a std::vector first.
//
//   dim_vector d{2, 3};                   // in place
//   std::vector<int64_t> v = d;           // an editable copy
//   d == dim_vector(v.begin(), v.end());

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <type_traits>
#include <vector>

namespace runnel {

class dim_vector {
public:
  /// Ranks up to this are stored without a heap allocation (TensorFlow's own limit for its inline
  /// shapes is similar; ranks above 6 are rare outside tests).
  static constexpr size_t inline_capacity = 6;

  dim_vector() = default;
  dim_vector(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.size()); }
  dim_vector(const std::vector<int64_t>& dims) { assign(dims.data(), dims.size()); }
  dim_vector(size_t count, int64_t value) { std::fill_n(reserve(count), count, value); }
  /// From an iterator range; two integers are a (count, value) fill, as with std::vector.
  /// A range that can be walked twice is counted first and copied in place; a single-pass one
  /// goes through a vector.
  template <class It, class = std::enable_if_t<!std::is_integral_v<It>>>
  dim_vector(It first, It last) {
    using category = typename std::iterator_traits<It>::iterator_category;
    if constexpr (std::is_base_of_v<std::forward_iterator_tag, category>) {
      std::copy(first, last, reserve(size_t(std::distance(first, last))));
    } else {
      std::vector<int64_t> v(first, last);
      assign(v.data(), v.size());
    }
  }
  dim_vector(const dim_vector& other) { assign(other.data(), other.size_); }
  dim_vector(dim_vector&& other) noexcept { take(other); }
  dim_vector& operator=(const dim_vector& other) {
    if (this != &other) {
      release();
      assign(other.data(), other.size_);
    }
    return *this;
  }
  dim_vector& operator=(dim_vector&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  ~dim_vector() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* data() const { return on_heap() ? heap_ : inline_; }
  int64_t* data() { return on_heap() ? heap_ : inline_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t front() const { return data()[0]; }
  int64_t back() const { return data()[size_ - 1]; }
  /// An editable copy.
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  operator std::vector<int64_t>() const { return to_vector(); }

  friend bool operator==(const dim_vector& a, const dim_vector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const dim_vector& a, const dim_vector& b) { return !(a == b); }

private:
  bool on_heap() const { return size_ > inline_capacity; }
  // Fills an empty vector. The heap path is out of line (dim_vector.cpp): inlined, GCC 12's bounds
  // analysis took its copy for one into the inline array and warned.
  void assign(const int64_t* dims, size_t count) {
    if (count > inline_capacity)
      return assign_heap(dims, count);
    size_ = count;
    if (count > 0)
      std::memcpy(inline_, dims, count * sizeof(int64_t));
  }
  [[gnu::noinline]] void assign_heap(const int64_t* dims, size_t count);
  // Sizes an empty vector to `count` unset dimensions and returns where they live.
  int64_t* reserve(size_t count) {
    if (count > inline_capacity)
      return reserve_heap(count);
    size_ = count;
    return inline_;
  }
  [[gnu::noinline]] int64_t* reserve_heap(size_t count);
  // Steals a heap block, or copies only the dimensions in use; leaves `other` empty.
  void take(dim_vector& other) noexcept {
    size_ = other.size_;
    if (other.on_heap())
      heap_ = other.heap_;
    else if (size_ > 0)
      std::memcpy(inline_, other.inline_, size_ * sizeof(int64_t));
    other.size_ = 0;
  }
  void release() {
    if (on_heap())
      delete[] heap_;
    size_ = 0;
  }

  size_t size_ = 0;
  union {
    int64_t inline_[inline_capacity];
    int64_t* heap_;
  };
};

} // namespace runnel
