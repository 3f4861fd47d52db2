// Gradient functions of the convolution and pooling ops.
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(conv) {
  using grads = std::vector<output>;
  reg.add("Conv2D", [](const gradient_context& c) {
    auto x = c.input(0), f = c.input(1), g = c.grad();
    auto attrs = same_attrs(c.n, {"strides", "padding", "data_format", "dilations"});
    auto dx = c.g.build("Conv2DBackpropInput", "Conv2DBackpropInput",
                        {shape_of(x).ep(), f.ep(), g.ep()}, attrs)[0];
    auto df = c.g.build("Conv2DBackpropFilter", "Conv2DBackpropFilter",
                        {x.ep(), shape_of(f).ep(), g.ep()}, attrs)[0];
    return grads{dx, df};
  });
  reg.add("MaxPool", [](const gradient_context& c) {
    auto attrs = same_attrs(c.n, {"ksize", "strides", "padding", "data_format"});
    return grads{c.g.build("MaxPoolGrad", "MaxPoolGrad",
                           {c.input(0).ep(), c.out(0).ep(), c.grad().ep()}, attrs)[0]};
  });
  reg.add("AvgPool", [](const gradient_context& c) {
    auto attrs = same_attrs(c.n, {"ksize", "strides", "padding", "data_format"});
    return grads{c.g.build("AvgPoolGrad", "AvgPoolGrad", {shape_of(c.input(0)).ep(), c.grad().ep()},
                           attrs)[0]};
  });
}

} // namespace runnel
