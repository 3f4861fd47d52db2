#include "runnel/ops/core/dim_vector.hpp"

namespace runnel {

// Out of line so that GCC's bounds analysis never sees these copies beside the inline array.

void dim_vector::assign_heap(const int64_t* dims, size_t count) {
  std::memcpy(reserve_heap(count), dims, count * sizeof(int64_t));
}

int64_t* dim_vector::reserve_heap(size_t count) {
  size_ = count;
  heap_ = new int64_t[count];
  return heap_;
}

} // namespace runnel
