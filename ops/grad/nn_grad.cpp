// Gradient functions of the neural-network ops.
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(nn) {
  using grads = std::vector<output>;
  reg.add("BiasAdd", [](const gradient_context& c) {
    auto g = c.grad();
    return grads{g, c.g.build("BiasAddGrad", "BiasAddGrad", {g.ep()})[0]};
  });
  reg.add("LogSoftmax", [](const gradient_context& c) {
    auto g = c.grad();
    return grads{g - exp(c.out(0)) * sum(g, {-1}, true)};
  });
  reg.add("L2Loss", [](const gradient_context& c) { return grads{c.input(0) * c.grad()}; });
  reg.add_non_differentiable("InTopK");
  reg.add("Softmax", [](const gradient_context& c) {
    auto y = c.out(0), g = c.grad();
    return grads{(g - sum(g * y, {-1}, true)) * y};
  });
  auto xent = [](const gradient_context& c) {
    // The forward op already computed d loss / d logits (output 1); scale each row by the
    // incoming gradient of the loss.
    auto g = reshape(c.grad(0), std::vector<int64_t>{-1, 1});
    return grads{g * c.out(1), output()};
  };
  reg.add("SoftmaxCrossEntropyWithLogits", [](const gradient_context& c) {
    // For dense labels, d loss / d labels = -log softmax(logits).
    auto g = reshape(c.grad(0), std::vector<int64_t>{-1, 1});
    return grads{g * c.out(1), -g * log_softmax(c.input(0))};
  });
  reg.add("SparseSoftmaxCrossEntropyWithLogits", xent);
}

} // namespace runnel
