#pragma once
// Eigen views of tensors, for kernel sources (Eigen is heavy: keep it out of other headers).
//
//   auto m = eigen_matrix<float>(t);       // Eigen::Map of a rank-2 tensor, row-major
//   auto a = eigen_array<float>(t);        // all elements as a flat Eigen array
//   auto x = eigen_tensor<float, 3>(t);    // Eigen::TensorMap, row-major, rank 3
//   x(1, 0, 2) = 5.f;                      // writes the tensor's buffer: no copy is made
//
// Views alias the tensor's buffer; write through them only into tensors the kernel allocated
// (or inputs it owns, see tensor::is_unique). Shapes are checked and errors thrown as
// runnel::error, since a mismatch here is a bug in the kernel.

#include <Eigen/Core>
#include <unsupported/Eigen/CXX11/Tensor>

#include "runnel/ops/core/tensor.hpp"

namespace runnel {

template <class T>
using eigen_matrix_map =
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T> using eigen_array_map = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T, int Rank>
using eigen_tensor_map = Eigen::TensorMap<Eigen::Tensor<T, Rank, Eigen::RowMajor, Eigen::Index>>;

namespace detail {
inline void check_view(const tensor& t, dtype want, int rank, const char* what) {
  if (t.type() != want || (rank >= 0 && t.rank() != rank))
    throw error(internal_error(std::string(what) + ": cannot view " + t.shape().to_string() + " " +
                               std::string(name(t.type())) + " as rank " + std::to_string(rank) +
                               " " + std::string(name(want))));
}
} // namespace detail

template <class T> eigen_matrix_map<T> eigen_matrix(const tensor& t) {
  detail::check_view(t, dtype_of<T>, 2, "eigen_matrix");
  return {t.data<T>(), Eigen::Index(t.dim(0)), Eigen::Index(t.dim(1))};
}

template <class T> eigen_array_map<T> eigen_array(const tensor& t) {
  detail::check_view(t, dtype_of<T>, -1, "eigen_array");
  return {t.data<T>(), Eigen::Index(t.num_elements())};
}

template <class T, int Rank> eigen_tensor_map<T, Rank> eigen_tensor(const tensor& t) {
  detail::check_view(t, dtype_of<T>, Rank, "eigen_tensor");
  Eigen::array<Eigen::Index, size_t(Rank)> dims;
  for (int i = 0; i < Rank; ++i)
    dims[size_t(i)] = Eigen::Index(t.dim(i));
  return eigen_tensor_map<T, Rank>(t.data<T>(), dims);
}

} // namespace runnel
