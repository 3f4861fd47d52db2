#include "runnel/ops/core/shape.hpp"

#include <algorithm>

namespace runnel {

bool shape::is_fully_defined() const {
  return known_rank_ && std::all_of(dims_.begin(), dims_.end(), [](int64_t d) { return d >= 0; });
}

int64_t shape::num_elements() const {
  if (!is_fully_defined())
    return -1;
  int64_t n = 1;
  for (auto d : dims_) {
    if (d == 0)
      return 0;
    if (__builtin_mul_overflow(n, d, &n) || n > max_elements)
      n = max_elements + 1; // saturate; a zero dimension later still makes the product 0
  }
  return n;
}

result<int64_t> shape::checked_num_elements() const {
  if (!is_fully_defined())
    return invalid_argument("shape " + to_string() + " is not fully defined");
  int64_t n = num_elements();
  if (n > max_elements)
    return invalid_argument("shape " + to_string() + " has more than 2^40 elements");
  return n;
}

bool shape::is_compatible_with(const shape& other) const {
  if (!known_rank_ || !other.known_rank_)
    return true;
  if (dims_.size() != other.dims_.size())
    return false;
  for (size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i] >= 0 && other.dims_[i] >= 0 && dims_[i] != other.dims_[i])
      return false;
  return true;
}

result<shape> shape::merge(const shape& other) const {
  if (!is_compatible_with(other))
    return invalid_argument("shapes " + to_string() + " and " + other.to_string() +
                            " are not compatible");
  if (!known_rank_)
    return other;
  if (!other.known_rank_)
    return *this;
  shape out = *this;
  for (size_t i = 0; i < dims_.size(); ++i)
    if (out.dims_[i] < 0)
      out.dims_[i] = other.dims_[i];
  return out;
}

std::string shape::to_string() const {
  if (!known_rank_)
    return "<unknown>";
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i)
      s += ",";
    s += dims_[i] < 0 ? "?" : std::to_string(dims_[i]);
  }
  return s + "]";
}

result<shape> broadcast_shapes(const shape& a, const shape& b) {
  if (!a.has_known_rank() || !b.has_known_rank())
    return shape::unknown();
  int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(size_t(rank), 1);
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da == 1) {
      out[size_t(i)] = db;
    } else if (db == 1) {
      out[size_t(i)] = da;
    } else if (da < 0 || db < 0) {
      out[size_t(i)] = da < 0 ? db : da; // one unknown: the known one wins (or it's an error later)
    } else if (da == db) {
      out[size_t(i)] = da;
    } else {
      return invalid_argument("incompatible shapes for broadcasting: " + a.to_string() + " and " +
                              b.to_string());
    }
  }
  return shape(std::move(out));
}

void broadcast_strides(const shape& in, const shape& out, int64_t* strides) {
  int r = out.rank();
  int64_t step = 1;
  for (int d = r - 1; d >= 0; --d) {
    int di = in.rank() - r + d;
    int64_t n = di >= 0 ? in[di] : 1;
    strides[d] = n == 1 && out[d] != 1 ? 0 : step;
    step *= n;
  }
}

result<matmul_dims> matmul_dims_of(const shape& a, const shape& b, bool transpose_a,
                                   bool transpose_b) {
  if (a.rank() != 2 || b.rank() != 2)
    return invalid_argument("MatMul needs matrices, got shapes " + a.to_string() + " and " +
                            b.to_string());
  int64_t m = a[transpose_a ? 1 : 0], k = a[transpose_a ? 0 : 1];
  int64_t kb = b[transpose_b ? 1 : 0], n = b[transpose_b ? 0 : 1];
  if (k != kb)
    return invalid_argument("matrix size-incompatible: In[0]: " + a.to_string() +
                            ", In[1]: " + b.to_string());
  return matmul_dims{m, n, k};
}

} // namespace runnel
