#pragma once
// The unary element-wise ops, each declared once: one row of RUNNEL_UNARY_OPS and its functor.
// Everything else follows from the row, with nothing more written:
//
//   its op definition           ops/defs/math_ops.cpp   (x -> y of x's dtype and shape)
//   its CPU kernel              ops/cpu/unary.cpp       (`array`: Eigen's vectorised form)
//   its CUDA kernel             ops/cuda/elementwise.cu (`apply`: one element, host and device)
//   its place in the GPU list   ops/gpu/gpu_kernels.cpp and the CUDA table
//   the fusion interpreter      ops/cpu/fused_elementwise.cpp (float32)
//   a fused activation          after MatMul/Conv2D and a bias, if listed in fused_activations
//
//   its gradient, if the functor has `grad(x, y, dy)`: a _UnaryGrad node (ops/grad/math_grad.cpp;
//                               the op is defined and has CPU and CUDA kernels beside the rows')
//
// tests/actors/op_coverage_test.cpp checks, for every row on every machine, that the CPU kernel,
// the fusion interpreter and `apply` (what the GPU runs) agree; tests/ops/gradient_cases.cpp
// checks every row's gradient against finite differences. The older rows keep TensorFlow's named
// gradient ops (ReluGrad, TanhGrad, ...: TensorFlow's graphs hold them), registered in
// ops/grad/math_grad.cpp and nn_grad.cpp.
//
// Columns: the op's name, its functor, and the dtypes it is defined for: `numbers` (floats and
// integers) or `reals` (floats only).
//
//   float y = op_softsign::apply(3.0f);       // 0.75
//   r = op_softsign::array(v);                // an Eigen array expression over v

#include <cmath>
#include <string_view>

#include "runnel/ops/core/math_functors.hpp"

namespace runnel {

struct op_neg {
  template <class T> RUNNEL_HD static T apply(T x) { return T(-x); }
  template <class A> static auto array(const A& v) { return -v; }
};
struct op_square {
  template <class T> RUNNEL_HD static T apply(T x) { return T(x * x); }
  template <class A> static auto array(const A& v) { return v.square(); }
};
struct op_abs {
  template <class T> RUNNEL_HD static T apply(T x) { return x < T(0) ? T(-x) : x; }
  template <class A> static auto array(const A& v) { return v.abs(); }
};
struct op_sign {
  template <class T> RUNNEL_HD static T apply(T x) { return T((x > T(0)) - (x < T(0))); }
  template <class A> static auto array(const A& v) {
    using T = typename A::Scalar;
    return (v > T(0)).template cast<T>() - (v < T(0)).template cast<T>();
  }
};
struct op_relu {
  template <class T> RUNNEL_HD static T apply(T x) { return x > T(0) ? x : T(0); }
  template <class A> static auto array(const A& v) { return v.max(typename A::Scalar(0)); }
};
struct op_relu6 {
  template <class T> RUNNEL_HD static T apply(T x) {
    return x > T(0) ? (x < T(6) ? x : T(6)) : T(0);
  }
  template <class A> static auto array(const A& v) {
    using T = typename A::Scalar;
    return v.max(T(0)).min(T(6));
  }
};
struct op_exp {
  template <class T> RUNNEL_HD static T apply(T x) { return std::exp(x); }
  template <class A> static auto array(const A& v) { return v.exp(); }
};
struct op_log {
  template <class T> RUNNEL_HD static T apply(T x) { return std::log(x); }
  template <class A> static auto array(const A& v) { return v.log(); }
};
struct op_log1p {
  template <class T> RUNNEL_HD static T apply(T x) { return std::log1p(x); }
  template <class A> static auto array(const A& v) { return v.log1p(); }
};
struct op_sqrt {
  template <class T> RUNNEL_HD static T apply(T x) { return std::sqrt(x); }
  template <class A> static auto array(const A& v) { return v.sqrt(); }
};
struct op_rsqrt {
  template <class T> RUNNEL_HD static T apply(T x) { return T(T(1) / std::sqrt(x)); }
  template <class A> static auto array(const A& v) { return v.rsqrt(); }
};
struct op_reciprocal {
  template <class T> RUNNEL_HD static T apply(T x) { return T(T(1) / x); }
  template <class A> static auto array(const A& v) { return v.inverse(); }
};
struct op_tanh {
  template <class T> RUNNEL_HD static T apply(T x) { return std::tanh(x); }
  template <class A> static auto array(const A& v) { return v.tanh(); }
};
struct op_sigmoid {
  template <class T> RUNNEL_HD static T apply(T x) { return T(T(1) / (T(1) + std::exp(-x))); }
  template <class A> static auto array(const A& v) { return v.logistic(); }
};
struct op_sin {
  template <class T> RUNNEL_HD static T apply(T x) { return std::sin(x); }
  template <class A> static auto array(const A& v) { return v.sin(); }
};
struct op_cos {
  template <class T> RUNNEL_HD static T apply(T x) { return std::cos(x); }
  template <class A> static auto array(const A& v) { return v.cos(); }
};
struct op_floor {
  template <class T> RUNNEL_HD static T apply(T x) { return std::floor(x); }
  template <class A> static auto array(const A& v) { return v.floor(); }
};
struct op_elu {
  template <class T> RUNNEL_HD static T apply(T x) { return x > T(0) ? x : T(std::expm1(x)); }
  template <class A> static auto array(const A& v) {
    using T = typename A::Scalar;
    return (v > T(0)).select(v, v.exp() - T(1));
  }
};
struct op_softplus { // log(1 + e^x) without overflow: x + log1p(e^-x) for large x
  template <class T> RUNNEL_HD static T apply(T x) {
    return x > T(0) ? T(x + std::log1p(std::exp(-x))) : T(std::log1p(std::exp(x)));
  }
  template <class A> static auto array(const A& v) {
    using T = typename A::Scalar;
    return (v > T(0)).select(v + (-v).exp().log1p(), v.exp().log1p());
  }
};

// Rows added since the table: their gradient is their functor's `grad(x, y, dy)` (and
// `grad_array`, its Eigen form), run by the one op _UnaryGrad on every device.

struct op_softsign { // x / (1 + |x|)
  template <class T> RUNNEL_HD static T apply(T x) { return T(x / (T(1) + (x < T(0) ? -x : x))); }
  template <class A> static auto array(const A& v) {
    using T = typename A::Scalar;
    return v / (v.abs() + T(1));
  }
  template <class T> RUNNEL_HD static T grad(T x, T, T dy) {
    T d = T(1) + (x < T(0) ? -x : x);
    return T(dy / (d * d));
  }
  template <class A> static auto grad_array(const A& x, const A&, const A& dy) {
    using T = typename A::Scalar;
    return dy / (x.abs() + T(1)).square();
  }
};
struct op_selu { // scale · (x if x > 0 else alpha · (e^x − 1)), Klambauer et al. 2017
  static constexpr double alpha = 1.6732632423543772848170429916717;
  static constexpr double scale = 1.0507009873554804934193349852946;
  template <class T> RUNNEL_HD static T apply(T x) {
    return x > T(0) ? T(T(scale) * x) : T(T(scale * alpha) * std::expm1(x));
  }
  template <class A> static auto array(const A& v) {
    using T = typename A::Scalar;
    return (v > T(0)).select(v * T(scale), (v.exp() - T(1)) * T(scale * alpha));
  }
  template <class T> RUNNEL_HD static T grad(T x, T y, T dy) {
    return x > T(0) ? T(dy * T(scale)) : T(dy * (y + T(scale * alpha)));
  }
  template <class A> static auto grad_array(const A& x, const A& y, const A& dy) {
    using T = typename A::Scalar;
    return (x > T(0)).select(dy * T(scale), dy * (y + T(scale * alpha)));
  }
};

struct op_erf { // the error function (GELU's exact form: x · (1 + erf(x / √2)) / 2)
  template <class T> RUNNEL_HD static T apply(T x) { return std::erf(x); }
  template <class A> static auto array(const A& v) {
    return v.unaryExpr([](typename A::Scalar a) { return std::erf(a); });
  }
  template <class T> RUNNEL_HD static T grad(T x, T, T dy) {
    return T(dy * T(1.1283791670955126) * std::exp(-x * x)); // 2/√π · e^(−x²)
  }
  template <class A> static auto grad_array(const A& x, const A&, const A& dy) {
    using T = typename A::Scalar;
    return dy * T(1.1283791670955126) * (-x.square()).exp();
  }
};

// clang-format off
#define RUNNEL_UNARY_OPS(X)                                                                        \
  X(Neg, op_neg, numbers)                                                                          \
  X(Square, op_square, numbers)                                                                    \
  X(Abs, op_abs, numbers)                                                                          \
  X(Sign, op_sign, numbers)                                                                        \
  X(Relu, op_relu, numbers)                                                                        \
  X(Relu6, op_relu6, numbers)                                                                      \
  X(Exp, op_exp, reals)                                                                            \
  X(Log, op_log, reals)                                                                            \
  X(Log1p, op_log1p, reals)                                                                        \
  X(Sqrt, op_sqrt, reals)                                                                          \
  X(Rsqrt, op_rsqrt, reals)                                                                        \
  X(Reciprocal, op_reciprocal, reals)                                                              \
  X(Tanh, op_tanh, reals)                                                                          \
  X(Sigmoid, op_sigmoid, reals)                                                                    \
  X(Sin, op_sin, reals)                                                                            \
  X(Cos, op_cos, reals)                                                                            \
  X(Floor, op_floor, reals)                                                                        \
  X(Elu, op_elu, reals)                                                                            \
  X(Softplus, op_softplus, reals)                                                                  \
  X(Softsign, op_softsign, reals)                                                                  \
  X(Selu, op_selu, reals)                                                                          \
  X(Erf, op_erf, reals)
// clang-format on

/// One value per row of RUNNEL_UNARY_OPS, in its order.
enum class unary_op : int {
#define RUNNEL_UNARY_ENUM(name, functor, domain) name,
  RUNNEL_UNARY_OPS(RUNNEL_UNARY_ENUM)
#undef RUNNEL_UNARY_ENUM
};

struct unary_op_info {
  const char* name;
  unary_op op;
  bool integers; ///< defined for integer dtypes too (`numbers`), not only floats (`reals`)
  bool has_grad; ///< its functor has `grad`: _UnaryGrad computes its gradient
};

/// Whether functor F gives its own gradient.
template <class F> constexpr bool has_unary_grad = requires(float x) {
  F::grad(x, x, x);
};

/// The rows, as data.
inline constexpr unary_op_info unary_ops[] = {
#define RUNNEL_UNARY_INFO(name, functor, domain)                                                   \
  {#name, unary_op::name, #domain[0] == 'n', has_unary_grad<functor>},
    RUNNEL_UNARY_OPS(RUNNEL_UNARY_INFO)
#undef RUNNEL_UNARY_INFO
};

/// Calls `f.template operator()<Functor>()` with the row's functor and returns what it returns.
/// The switch is generated from the rows: no case can be forgotten.
template <class F> auto visit_unary(unary_op op, F&& f) {
  switch (op) {
#define RUNNEL_UNARY_CASE(name, functor, domain)                                                   \
  case unary_op::name:                                                                             \
    return f.template operator()<functor>();
    RUNNEL_UNARY_OPS(RUNNEL_UNARY_CASE)
#undef RUNNEL_UNARY_CASE
  }
  return f.template operator()<op_neg>(); // not reached: every enumerator has its case
}

/// The row named `name`, or null.
inline const unary_op_info* find_unary_op(std::string_view name) {
  for (auto& u : unary_ops)
    if (name == u.name)
      return &u;
  return nullptr;
}

/// The rows the graph optimizer fuses after a MatMul or Conv2D and its bias, as Grappler's
/// remapper does (ops/optimize/remap.cpp): the `activation` attribute of _FusedMatMul and
/// _FusedConv2D names one (or is empty), and their CPU kernel (ops/cpu/fused.cpp) applies the
/// row's functor. Adding a row here is all a new fused activation takes.
inline constexpr unary_op fused_activations[] = {unary_op::Relu, unary_op::Relu6, unary_op::Elu,
                                                 unary_op::Tanh, unary_op::Sigmoid};

/// The fused activation named `name`, or null.
inline const unary_op_info* find_fused_activation(std::string_view name) {
  for (unary_op a : fused_activations)
    if (name == unary_ops[int(a)].name)
      return &unary_ops[int(a)];
  return nullptr;
}

} // namespace runnel
