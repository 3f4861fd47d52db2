#pragma once
// Tensor shapes. During shape inference a dimension may be unknown (-1) and the rank itself may
// be unknown; a tensor's shape is always fully known.
//
//   shape s{2, 3};              // [2,3]
//   shape p{-1, 784};           // [?,784]: batch size not known when the graph is built
//   shape::unknown()            // <unknown>: rank not known
//   s.num_elements() == 6; p.is_compatible_with(s) == false

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "runnel/ops/core/dim_vector.hpp"
#include "runnel/ops/core/status.hpp"

namespace runnel {

class shape {
public:
  static constexpr int64_t unknown_dim = -1;

  /// A scalar (rank 0).
  shape() = default;
  shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit shape(const std::vector<int64_t>& dims) : dims_(dims) {}
  explicit shape(dim_vector dims) : dims_(std::move(dims)) {}
  /// A shape whose rank is unknown.
  static shape unknown() {
    shape s;
    s.known_rank_ = false;
    return s;
  }
  /// Rank `rank` with every dimension unknown.
  static shape unknown_dims(int rank) { return shape(dim_vector(size_t(rank), unknown_dim)); }

  bool has_known_rank() const { return known_rank_; }
  /// The rank; -1 when unknown.
  int rank() const { return known_rank_ ? int(dims_.size()) : -1; }
  int64_t dim(int i) const { return dims_[size_t(i)]; }
  int64_t operator[](int i) const { return dims_[size_t(i)]; }
  void set_dim(int i, int64_t d) { dims_[size_t(i)] = d; }
  /// The dimensions, stored in place up to rank 6 (copying a shape allocates nothing);
  /// `std::vector<int64_t> d = s.dims();` for an editable copy.
  const dim_vector& dims() const { return dims_; }
  /// Known rank and no unknown dimension.
  bool is_fully_defined() const;
  /// Product of the dimensions; -1 when not fully defined; `max_elements + 1` when the product
  /// is larger than `max_elements` (hostile or damaged input: it never wraps around).
  int64_t num_elements() const;
  /// The most elements a tensor may hold (2^40, as TensorFlow-sized inputs never come near it):
  /// shapes read from files and the network are checked against it before anything allocates.
  static constexpr int64_t max_elements = int64_t(1) << 40;
  /// The element count, or an error naming the shape when it is not fully defined or exceeds
  /// `max_elements`.
  result<int64_t> checked_num_elements() const;
  /// True when some fully defined shape could match both.
  bool is_compatible_with(const shape& other) const;
  /// The most specific shape compatible with both, or an error naming both.
  result<shape> merge(const shape& other) const;
  /// "[2,3]", "[?,784]", "<unknown>", "[]" for scalars.
  std::string to_string() const;

  friend bool operator==(const shape& a, const shape& b) {
    return a.known_rank_ == b.known_rank_ && a.dims_ == b.dims_;
  }

private:
  dim_vector dims_;
  bool known_rank_ = true;
};

/// NumPy broadcasting of two shapes (unknown dims allowed); an error names both shapes.
result<shape> broadcast_shapes(const shape& a, const shape& b);

/// Per dimension of `out`, how many of `in`'s elements (row-major) one step along it moves when
/// `in` is broadcast to `out`: 0 where `in` repeats (its size 1, or the dimension missing).
/// Writes out.rank() strides; `in` must broadcast to `out`.
void broadcast_strides(const shape& in, const shape& out, int64_t* strides);

/// The sizes of C[m,n] = op(A)[m,k] · op(B)[k,n] for matrices `a` and `b` (transposed when
/// asked), or TensorFlow's error naming both shapes. Every MatMul kernel checks with it.
struct matmul_dims {
  int64_t m, n, k;
};
result<matmul_dims> matmul_dims_of(const shape& a, const shape& b, bool transpose_a,
                                   bool transpose_b);

} // namespace runnel
