#include <catch2/catch.hpp>

#include "runnel/ops/core/eigen_access.hpp"

using namespace runnel;

TEST_CASE("Eigen views alias the tensor's buffer", "[ops]") {
  auto t = tensor::from_values<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto m = eigen_matrix<float>(t);
  CHECK(m.rows() == 2);
  CHECK(m.cols() == 3);
  CHECK(m(1, 0) == 4);
  m(0, 2) = 30;
  CHECK(t.data<float>()[2] == 30);

  auto x = eigen_tensor<float, 2>(t);
  CHECK(x.dimension(0) == 2);
  CHECK(x(1, 2) == 6);
  Eigen::Tensor<float, 0, Eigen::RowMajor> total = x.sum();
  CHECK(total() == 1 + 2 + 30 + 4 + 5 + 6);

  auto a = eigen_array<float>(t);
  a *= 2.f;
  CHECK(t.data<float>()[5] == 12);

  auto row = t.slice(1, 2); // a view at an offset still maps correctly
  CHECK(eigen_matrix<float>(row)(0, 1) == 10);

  CHECK_THROWS_AS(eigen_matrix<double>(t), runnel::error);
  CHECK_THROWS_AS((eigen_tensor<float, 3>(t)), runnel::error);
}
