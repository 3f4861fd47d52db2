// Gradient functions of the math ops: element-wise arithmetic, the unary rows, reductions and
// matrix products.
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/grad/gradients.hpp"

namespace runnel {
namespace {

using grads = std::vector<output>;

/// The keep_dims shape of a reduction of `x` over `axes` (a tensor of axes).
output kept_shape(output x, output axes) {
  return x.owner().build("ReducedShape", "ReducedShape",
                         {shape_of(x).ep(), cast(axes, dtype::i32).ep()})[0];
}

/// Broadcasts a reduction's gradient back to the input: reshape to keep_dims, then expand.
output unreduce(output grad, output x, output axes) {
  auto kept = reshape(grad, kept_shape(x, axes));
  return kept * ones_like(x);
}

/// Math ops with no gradient: comparisons, logic, indices and piecewise-constant functions.
void register_non_differentiable(gradient_registry& reg) {
  for (auto op : {"Greater", "Less", "GreaterEqual", "LessEqual", "Equal", "NotEqual", "ArgMax",
                  "ArgMin", "All", "Any", "Sign", "FloorDiv",
                  "Floor", // piecewise constant: TensorFlow gives it no gradient
                  "LogicalAnd", "LogicalOr", "LogicalNot"})
    reg.add_non_differentiable(op);
}

/// Element-wise ops: arithmetic, the unary table's rows, casts and selects.
void register_elementwise_gradients(gradient_registry& reg) {
  reg.add("Add", [](const gradient_context& c) {
    return grads{sum_to_shape_of(c.grad(), c.input(0)), sum_to_shape_of(c.grad(), c.input(1))};
  });
  reg.add("Sub", [](const gradient_context& c) {
    return grads{sum_to_shape_of(c.grad(), c.input(0)), sum_to_shape_of(-c.grad(), c.input(1))};
  });
  reg.add("Mul", [](const gradient_context& c) {
    auto a = c.input(0), b = c.input(1);
    return grads{sum_to_shape_of(c.grad() * b, a), sum_to_shape_of(a * c.grad(), b)};
  });
  reg.add("Div", [](const gradient_context& c) {
    auto a = c.input(0), b = c.input(1), g = c.grad();
    return grads{sum_to_shape_of(g / b, a), sum_to_shape_of(-g * a / (b * b), b)};
  });
  reg.add("FloorMod", [](const gradient_context& c) {
    auto a = c.input(0), b = c.input(1), g = c.grad();
    return grads{sum_to_shape_of(g, a), sum_to_shape_of(-g * floor_div(a, b), b)};
  });
  reg.add("Pow", [](const gradient_context& c) {
    auto x = c.input(0), y = c.input(1), z = c.out(0), g = c.grad();
    auto gx = g * y * pow(x, y - 1.0);
    // d/dy x^y = x^y log x, taken as 0 where x <= 0 (as TensorFlow does).
    auto positive = greater(x, zeros_like(x));
    auto safe_log = log(select(positive, x, ones_like(x)));
    auto gy = g * z * select(positive, safe_log, zeros_like(x));
    return grads{sum_to_shape_of(gx, x), sum_to_shape_of(gy, y)};
  });
  auto minmax = [](bool is_max) {
    return [is_max](const gradient_context& c) {
      auto a = c.input(0), b = c.input(1), g = c.grad();
      auto pick_a = is_max ? greater_equal(a, b) : less_equal(a, b);
      auto ga = select(pick_a, g, zeros_like(g));
      auto gb = select(pick_a, zeros_like(g), g);
      return grads{sum_to_shape_of(ga, a), sum_to_shape_of(gb, b)};
    };
  };
  reg.add("Maximum", minmax(true));
  reg.add("Minimum", minmax(false));
  reg.add("SquaredDifference", [](const gradient_context& c) {
    auto a = c.input(0), b = c.input(1);
    auto d = c.grad() * (a - b) * 2.0;
    return grads{sum_to_shape_of(d, a), sum_to_shape_of(-d, b)};
  });
  reg.add("Atan2", [](const gradient_context& c) { // d/dy = x / (x² + y²), d/dx = -y / (x² + y²)
    auto y = c.input(0), x = c.input(1);
    auto g = c.grad() / (x * x + y * y);
    return grads{sum_to_shape_of(g * x, y), sum_to_shape_of(-g * y, x)};
  });
  reg.add("Neg", [](const gradient_context& c) { return grads{-c.grad()}; });
  reg.add("Exp", [](const gradient_context& c) { return grads{c.grad() * c.out(0)}; });
  reg.add("Log",
          [](const gradient_context& c) { return grads{c.grad() * reciprocal(c.input(0))}; });
  reg.add("Log1p",
          [](const gradient_context& c) { return grads{c.grad() * reciprocal(c.input(0) + 1.0)}; });
  reg.add("Square", [](const gradient_context& c) { return grads{c.grad() * (c.input(0) * 2.0)}; });
  auto y_dy = [](const char* op) {
    return [op](const gradient_context& c) {
      return grads{c.g.build(op, op, {c.out(0).ep(), c.grad().ep()})[0]};
    };
  };
  // The unary rows whose functor gives its gradient (ops/core/unary_ops.hpp): one _UnaryGrad.
  for (auto& u : unary_ops)
    if (u.has_grad)
      reg.add(u.name, [op = std::string(u.name)](const gradient_context& c) {
        return grads{c.g.build("_UnaryGrad", op + "Grad",
                               {c.input(0).ep(), c.out(0).ep(), c.grad().ep()}, {{"op", op}})[0]};
      });
  reg.add("Sqrt", y_dy("SqrtGrad"));
  reg.add("Rsqrt", y_dy("RsqrtGrad"));
  reg.add("Reciprocal", y_dy("ReciprocalGrad"));
  reg.add("Tanh", y_dy("TanhGrad"));
  reg.add("Sigmoid", y_dy("SigmoidGrad"));
  reg.add("Abs", [](const gradient_context& c) { return grads{c.grad() * sign(c.input(0))}; });
  reg.add("Sin", [](const gradient_context& c) { return grads{c.grad() * cos(c.input(0))}; });
  reg.add("Cos", [](const gradient_context& c) { return grads{-c.grad() * sin(c.input(0))}; });
  reg.add("Cast", [](const gradient_context& c) {
    dtype src = c.input(0).type();
    if (!is_floating(src) || !is_floating(c.grad().type()))
      return grads{output()};
    return grads{cast(c.grad(), src)};
  });
  reg.add("AddN", [](const gradient_context& c) { return grads(c.inputs.size(), c.grad()); });
  reg.add("Select", [](const gradient_context& c) {
    auto g = c.grad();
    auto z = zeros_like(g);
    return grads{output(), select(c.input(0), g, z), select(c.input(0), z, g)};
  });
}

/// MatMul and the reductions.
void register_reduction_gradients(gradient_registry& reg) {
  reg.add("MatMul", [](const gradient_context& c) {
    bool ta = get_attr<bool>(c.n.attrs, "transpose_a");
    bool tb = get_attr<bool>(c.n.attrs, "transpose_b");
    auto a = c.input(0), b = c.input(1), g = c.grad();
    if (!ta && !tb)
      return grads{matmul(g, b, {false, true}), matmul(a, g, {true, false})};
    if (!ta && tb)
      return grads{matmul(g, b), matmul(g, a, {true, false})};
    if (ta && !tb)
      return grads{matmul(b, g, {false, true}), matmul(a, g)};
    return grads{matmul(b, g, {true, true}), matmul(g, a, {true, true})};
  });
  reg.add("Sum", [](const gradient_context& c) {
    return grads{unreduce(c.grad(), c.input(0), c.input(1)), output()};
  });
  reg.add("Mean", [](const gradient_context& c) {
    auto x = c.input(0);
    auto count = cast(size(x), x.type()) / cast(size(c.out(0)), x.type());
    return grads{unreduce(c.grad(), x, c.input(1)) / count, output()};
  });
  reg.add("Prod", [](const gradient_context& c) {
    // d prod / d x_i = product of the other elements of x_i's group. Without zeros that is
    // prod / x_i; with one zero, only the zero element has a gradient (the product of the
    // non-zeros); with two or more, every gradient is zero.
    auto x = c.input(0), axes = c.input(1);
    auto kept = kept_shape(x, axes);
    auto is_zero = equal(x, zeros_like(x));
    auto zeros_in_group = reshape(sum(cast(is_zero, x.type()), axes, false), kept) * ones_like(x);
    auto nonzero_prod =
        c.g.build("Prod", "Prod", {select(is_zero, ones_like(x), x).ep(), axes.ep()},
                  {{"keep_dims", true}})[0] *
        ones_like(x);
    auto g = reshape(c.grad(), kept) * ones_like(x);
    auto safe_x = select(is_zero, ones_like(x), x);
    auto none_zero = g * nonzero_prod / safe_x;
    auto one_zero = select(is_zero, g * nonzero_prod, zeros_like(x));
    auto zero = zeros_like(x);
    auto count0 = equal(zeros_in_group, zeros_like(x));
    auto count1 = equal(zeros_in_group, ones_like(x));
    return grads{select(count0, none_zero, select(count1, one_zero, zero)), output()};
  });
  // Min and Max: the gradient goes to the elements equal to the result, split among ties.
  auto extremum = [](const gradient_context& c) {
    auto x = c.input(0), axes = c.input(1);
    auto kept = kept_shape(x, axes);
    auto y = reshape(c.out(0), kept);
    auto indicators = cast(equal(x, y * ones_like(x)), x.type());
    auto count = reshape(sum(indicators, axes, false), kept);
    return grads{indicators / count * reshape(c.grad(), kept), output()};
  };
  reg.add("Min", extremum);
  reg.add("Max", extremum);
}

/// Batched matrix products and the activations with a gradient op of their own.
void register_matmul_activation_gradients(gradient_registry& reg) {
  reg.add("BatchMatMul", [](const gradient_context& c) {
    bool ax = get_attr<bool>(c.n.attrs, "adj_x"), ay = get_attr<bool>(c.n.attrs, "adj_y");
    auto x = c.input(0), y = c.input(1), g = c.grad();
    if (!ax && !ay)
      return grads{batch_matmul(g, y, false, true), batch_matmul(x, g, true, false)};
    if (!ax && ay)
      return grads{batch_matmul(g, y), batch_matmul(g, x, true, false)};
    if (ax && !ay)
      return grads{batch_matmul(y, g, false, true), batch_matmul(x, g)};
    return grads{batch_matmul(y, g, true, true), batch_matmul(g, x, true, true)};
  });
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
}

} // namespace

RUNNEL_GRADIENT_FAMILY(math) {
  register_non_differentiable(reg);
  register_elementwise_gradients(reg);
  register_reduction_gradients(reg);
  register_matmul_activation_gradients(reg);
}

} // namespace runnel
