// Gradient functions of the linear-algebra ops.
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(linalg) {
  using grads = std::vector<output>;
  reg.add("MatrixInverse", [](const gradient_context& c) {
    // d inv(A) = -inv(A)ᵀ · g · inv(A)ᵀ
    auto inv = c.out(0);
    return grads{-batch_matmul(batch_matmul(inv, c.grad(), true, false), inv, false, true)};
  });
  reg.add("MatrixDeterminant", [](const gradient_context& c) {
    // d det(A) / dA = det(A) · inv(A)ᵀ
    auto a = c.input(0);
    auto scale = expand_dims(expand_dims(c.grad() * c.out(0), -1), -1);
    return grads{scale * matrix_inverse(a, true)};
  });
}

} // namespace runnel
