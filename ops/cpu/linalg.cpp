// Linear-algebra kernels: MatrixInverse and MatrixDeterminant (Eigen, batched).
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {
namespace {

class matrix_kernel : public kernel {
public:
  matrix_kernel(const kernel_construction& c, bool determinant)
      : det_(determinant), adjoint_(!determinant && c.attr<bool>("adjoint")) {}
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    int r = x.rank();
    if (r < 2 || x.dim(r - 1) != x.dim(r - 2))
      return invalid_argument("input must be square matrices, got " + x.shape().to_string());
    int64_t n = x.dim(r - 1), batch = n ? x.num_elements() / (n * n) : 0;
    std::vector<int64_t> bdims(x.shape().dims().begin(), x.shape().dims().end() - 2);
    tensor& out = det_ ? ctx.allocate_output(0, x.type(), shape(bdims))
                       : ctx.allocate_output(0, x.type(), x.shape());
    return dispatch_number(x.type(), [&]<class T>() -> status {
      if constexpr (std::is_floating_point_v<T>) {
        using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        for (int64_t i = 0; i < batch; ++i) {
          Eigen::Map<const matrix> m(x.data<T>() + i * n * n, n, n);
          Eigen::PartialPivLU<matrix> lu(m);
          if (det_) {
            out.data<T>()[i] = lu.determinant();
            continue;
          }
          // A (numerically) singular matrix is an error, as in TensorFlow.
          auto& u = lu.matrixLU();
          T scale = m.cwiseAbs().maxCoeff();
          for (int64_t j = 0; j < n; ++j)
            if (std::abs(u(j, j)) <= std::numeric_limits<T>::epsilon() * scale * T(n))
              return invalid_argument("matrix " + std::to_string(i) + " is not invertible");
          if (adjoint_) // inv(Aᵀ) = inv(A)ᵀ
            Eigen::Map<matrix>(out.data<T>() + i * n * n, n, n) = lu.inverse().transpose();
          else
            Eigen::Map<matrix>(out.data<T>() + i * n * n, n, n) = lu.inverse();
        }
      }
      return {};
    });
  }

private:
  bool det_, adjoint_;
};

} // namespace

RUNNEL_KERNEL_FAMILY(linalg) {
  auto cpu = device_type::cpu;
  const std::vector<dtype> reals{dtype::f32, dtype::f64};
  reg.add("MatrixInverse", cpu, reals, [](const kernel_construction& c) {
    return result<std::unique_ptr<kernel>>(std::make_unique<matrix_kernel>(c, false));
  });
  reg.add("MatrixDeterminant", cpu, reals, [](const kernel_construction& c) {
    return result<std::unique_ptr<kernel>>(std::make_unique<matrix_kernel>(c, true));
  });
}

} // namespace runnel
