// Gradient functions of the neural-network ops.
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(nn) {
  using grads = std::vector<output>;
  auto grad_x = [](const char* op) {
    return [op](const gradient_context& c) {
      return grads{c.g.build(op, op, {c.grad().ep(), c.input(0).ep()})[0]};
    };
  };
  reg.add("Relu", grad_x("ReluGrad"));
  reg.add("Relu6", grad_x("Relu6Grad"));
  reg.add("Softplus", grad_x("SoftplusGrad"));
  reg.add("Elu", [](const gradient_context& c) {
    return grads{c.g.build("EluGrad", "EluGrad", {c.grad().ep(), c.out(0).ep()})[0]};
  });
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
  auto same_attrs = [](const node& n, std::initializer_list<const char*> keys) {
    attr_map a;
    for (auto k : keys)
      a[k] = n.attrs.at(k);
    return a;
  };
  reg.add("Conv2D", [same_attrs](const gradient_context& c) {
    auto x = c.input(0), f = c.input(1), g = c.grad();
    auto attrs = same_attrs(c.n, {"strides", "padding", "data_format", "dilations"});
    auto dx = c.g.build("Conv2DBackpropInput", "Conv2DBackpropInput",
                        {shape_of(x).ep(), f.ep(), g.ep()}, attrs)[0];
    auto df = c.g.build("Conv2DBackpropFilter", "Conv2DBackpropFilter",
                        {x.ep(), shape_of(f).ep(), g.ep()}, attrs)[0];
    return grads{dx, df};
  });
  reg.add("FusedBatchNorm", [same_attrs](const gradient_context& c) {
    // From the saved mean and 1/sqrt(var + eps) (outputs 3 and 4); mean and variance inputs get
    // no gradient (in training they are unused, in inference they are statistics, not weights).
    auto attrs = same_attrs(c.n, {"epsilon", "data_format", "is_training"});
    auto outs = c.g.build("FusedBatchNormGrad", "FusedBatchNormGrad",
                          {c.grad(0).ep(), c.input(0).ep(), c.input(1).ep(), c.out(3).ep(),
                           c.out(4).ep()},
                          attrs);
    return grads{outs[0], outs[1], outs[2], output(), output()};
  });
  reg.add_non_differentiable("FusedBatchNormGrad");
  reg.add("MaxPool", [same_attrs](const gradient_context& c) {
    auto attrs = same_attrs(c.n, {"ksize", "strides", "padding", "data_format"});
    return grads{c.g.build("MaxPoolGrad", "MaxPoolGrad",
                           {c.input(0).ep(), c.out(0).ep(), c.grad().ep()}, attrs)[0]};
  });
  reg.add("AvgPool", [same_attrs](const gradient_context& c) {
    auto attrs = same_attrs(c.n, {"ksize", "strides", "padding", "data_format"});
    return grads{c.g.build("AvgPoolGrad", "AvgPoolGrad", {shape_of(c.input(0)).ep(), c.grad().ep()},
                           attrs)[0]};
  });
  reg.add("SoftmaxCrossEntropyWithLogits", [](const gradient_context& c) {
    // For dense labels, d loss / d labels = -log softmax(logits).
    auto g = reshape(c.grad(0), std::vector<int64_t>{-1, 1});
    return grads{g * c.out(1), -g * log_softmax(c.input(0))};
  });
  reg.add("SparseSoftmaxCrossEntropyWithLogits", xent);
}

} // namespace runnel
