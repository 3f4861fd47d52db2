#pragma once
// The binary element-wise ops, each declared once: one row of RUNNEL_BINARY_OPS and its functor.
// Everything else follows from the row, with nothing more written:
//
//   its op definition         ops/defs/math_ops.cpp    (its kind: inputs, outputs and dtypes)
//   its CPU kernel            ops/cpu/elementwise.cpp  (NumPy broadcasting; `apply` per element)
//   its CUDA kernel           ops/cuda/elementwise.cu  (`apply` per element), its place in the
//                             GPU list (ops/gpu/gpu_kernels.cpp) and the CUDA table: rows whose
//                             device column is `gpu` or `gpu_floats`
//   the fusion interpreter    ops/cpu/fused_elementwise.cpp (float32), if its fusion column
//                             is `fused`: through the functor's `array(a, b)`, its Eigen form
//
// Their gradients are functions of the graph (ops/grad/math_grad.cpp). Kinds:
//
//   numbers    T, T -> T for floats (16-bit ones through float) and integers
//   reals      T, T -> T for floats only (the activations' gradient helpers, TensorFlow's order)
//   compare    T, T -> bool, on numbers
//   equality   T, T -> bool, on numbers, bool and string
//   logical    bool, bool -> bool
//
// Columns: the op's name, its functor, its kind, its devices — `gpu` (a CUDA kernel for every GPU
// dtype of the kind), `gpu_floats` (floats only: integer Div stays on the CPU, which checks for
// zero divisors) or `cpu` — and `fused` or `unfused` (a `fused` row's functor must have `array`;
// its gradient helpers and arithmetic join chains the graph optimizer fuses).
//
// tests/actors/op_coverage_test.cpp checks every fused row's `array` against its CPU kernel;
// tests/gpu/gpu_kernels_test.cpp every GPU row's CUDA kernel against the CPU's.
//
//   float y = op_add::apply(1.0f, 2.0f);                 // 3
//   bool z = op_greater::apply(int32_t(2), int32_t(1));  // true
//   visit_binary(binary_op::Mul, []<class Row>() { ... Row::functor::apply(a, b) ... });

#include <string_view>

#include "runnel/ops/core/math_functors.hpp"

namespace runnel {

struct op_add {
  template <class T> RUNNEL_HD static T apply(T a, T b) { return T(a + b); }
  template <class A> static auto array(const A& a, const A& b) { return a + b; }
};
struct op_sub {
  template <class T> RUNNEL_HD static T apply(T a, T b) { return T(a - b); }
  template <class A> static auto array(const A& a, const A& b) { return a - b; }
};
struct op_mul {
  template <class T> RUNNEL_HD static T apply(T a, T b) { return T(a * b); }
  template <class A> static auto array(const A& a, const A& b) { return a * b; }
};
struct op_div {
  template <class T> RUNNEL_HD static T apply(T a, T b) { return T(a / b); }
  template <class A> static auto array(const A& a, const A& b) { return a / b; }
};
struct op_floor_div {
  template <class T> RUNNEL_HD static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      T q = a / b;
      return (a % b != 0 && ((a < 0) != (b < 0))) ? T(q - 1) : q;
    } else {
      return std::floor(a / b);
    }
  }
};
struct op_mod { // Python semantics: the result has the divisor's sign (TensorFlow's FloorMod)
  template <class T> RUNNEL_HD static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      T r = a % b;
      return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
    } else {
      T r = std::fmod(a, b);
      return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
    }
  }
};
struct op_maximum {
  template <class T> RUNNEL_HD static T apply(T p, T q) {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(p) || std::isnan(q))
        return std::numeric_limits<T>::quiet_NaN();
    return p > q ? p : q;
  }
  template <class A> static auto array(const A& a, const A& b) { return a.max(b); }
};
struct op_minimum {
  template <class T> RUNNEL_HD static T apply(T p, T q) {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(p) || std::isnan(q))
        return std::numeric_limits<T>::quiet_NaN();
    return p < q ? p : q;
  }
  template <class A> static auto array(const A& a, const A& b) { return a.min(b); }
};
struct op_pow {
  template <class T> RUNNEL_HD static T apply(T p, T q) {
    if constexpr (std::is_integral_v<T>)
      return int_pow(p, q);
    else
      return T(std::pow(p, q));
  }
};
struct op_squared_difference {
  template <class T> RUNNEL_HD static T apply(T a, T b) { return T((a - b) * (a - b)); }
  template <class A> static auto array(const A& a, const A& b) { return (a - b).square(); }
};
struct op_atan2 { // (y, x): the angle of the point (x, y), in [-pi, pi], as std::atan2
  template <class T> RUNNEL_HD static T apply(T y, T x) { return T(std::atan2(y, x)); }
  template <class A> static auto array(const A& y, const A& x) {
    using S = typename A::Scalar;
    return y.binaryExpr(x, [](S a, S b) { return S(std::atan2(a, b)); });
  }
};
struct op_relu_grad { // (gradients, features)
  template <class T> RUNNEL_HD static T apply(T g, T x) { return x > T(0) ? g : T(0); }
  template <class A> static auto array(const A& g, const A& x) {
    return (x > typename A::Scalar(0)).select(g, typename A::Scalar(0));
  }
};
struct op_relu6_grad {
  template <class T> RUNNEL_HD static T apply(T g, T x) {
    return (x > T(0) && x < T(6)) ? g : T(0);
  }
};
struct op_elu_grad { // (gradients, outputs)
  template <class T> RUNNEL_HD static T apply(T g, T y) { return y > T(0) ? g : T(g * (y + T(1))); }
};
struct op_softplus_grad { // (gradients, features)
  template <class T> RUNNEL_HD static T apply(T g, T x) { return T(g / (T(1) + std::exp(-x))); }
};
struct op_sigmoid_grad { // (y, dy)
  template <class T> RUNNEL_HD static T apply(T y, T g) { return T(g * y * (T(1) - y)); }
  template <class A> static auto array(const A& y, const A& g) {
    return g * y * (typename A::Scalar(1) - y);
  }
};
struct op_tanh_grad {
  template <class T> RUNNEL_HD static T apply(T y, T g) { return T(g * (T(1) - y * y)); }
  template <class A> static auto array(const A& y, const A& g) {
    return g * (typename A::Scalar(1) - y * y);
  }
};
struct op_sqrt_grad {
  template <class T> RUNNEL_HD static T apply(T y, T g) { return T(g * T(0.5) / y); }
};
struct op_rsqrt_grad {
  template <class T> RUNNEL_HD static T apply(T y, T g) { return T(g * T(-0.5) * y * y * y); }
};
struct op_reciprocal_grad {
  template <class T> RUNNEL_HD static T apply(T y, T g) { return T(-g * y * y); }
};
struct op_greater {
  template <class T> RUNNEL_HD static bool apply(T a, T b) { return a > b; }
};
struct op_less {
  template <class T> RUNNEL_HD static bool apply(T a, T b) { return a < b; }
};
struct op_greater_equal {
  template <class T> RUNNEL_HD static bool apply(T a, T b) { return a >= b; }
};
struct op_less_equal {
  template <class T> RUNNEL_HD static bool apply(T a, T b) { return a <= b; }
};
struct op_equal {
  template <class T> RUNNEL_HD static bool apply(const T& a, const T& b) { return a == b; }
};
struct op_not_equal {
  template <class T> RUNNEL_HD static bool apply(const T& a, const T& b) { return !(a == b); }
};
struct op_logical_and {
  template <class T> RUNNEL_HD static bool apply(T a, T b) { return a && b; }
};
struct op_logical_or {
  template <class T> RUNNEL_HD static bool apply(T a, T b) { return a || b; }
};

// clang-format off
#define RUNNEL_BINARY_OPS(X)                                                                       \
  X(Add, op_add, numbers, gpu, fused)                                                              \
  X(Sub, op_sub, numbers, gpu, fused)                                                              \
  X(Mul, op_mul, numbers, gpu, fused)                                                              \
  X(Div, op_div, numbers, gpu_floats, fused)                                                       \
  X(FloorDiv, op_floor_div, numbers, cpu, unfused)                                                 \
  X(FloorMod, op_mod, numbers, cpu, unfused)                                                       \
  X(Mod, op_mod, numbers, cpu, unfused)                                                            \
  X(Maximum, op_maximum, numbers, gpu, fused)                                                      \
  X(Minimum, op_minimum, numbers, gpu, fused)                                                      \
  X(Pow, op_pow, numbers, cpu, unfused)                                                            \
  X(SquaredDifference, op_squared_difference, numbers, gpu, fused)                                 \
  X(Atan2, op_atan2, reals, gpu, fused)                                                            \
  X(Greater, op_greater, compare, gpu, unfused)                                                    \
  X(Less, op_less, compare, gpu, unfused)                                                          \
  X(GreaterEqual, op_greater_equal, compare, cpu, unfused)                                         \
  X(LessEqual, op_less_equal, compare, cpu, unfused)                                               \
  X(Equal, op_equal, equality, gpu, unfused)                                                       \
  X(NotEqual, op_not_equal, equality, cpu, unfused)                                                \
  X(LogicalAnd, op_logical_and, logical, cpu, unfused)                                             \
  X(LogicalOr, op_logical_or, logical, cpu, unfused)                                               \
  X(ReluGrad, op_relu_grad, reals, gpu, fused)                                                     \
  X(Relu6Grad, op_relu6_grad, reals, cpu, unfused)                                                 \
  X(EluGrad, op_elu_grad, reals, cpu, unfused)                                                     \
  X(SoftplusGrad, op_softplus_grad, reals, cpu, unfused)                                           \
  X(SigmoidGrad, op_sigmoid_grad, reals, gpu, fused)                                               \
  X(TanhGrad, op_tanh_grad, reals, gpu, fused)                                                     \
  X(SqrtGrad, op_sqrt_grad, reals, cpu, unfused)                                                   \
  X(RsqrtGrad, op_rsqrt_grad, reals, cpu, unfused)                                                 \
  X(ReciprocalGrad, op_reciprocal_grad, reals, cpu, unfused)
// clang-format on

/// One value per row of RUNNEL_BINARY_OPS, in its order.
enum class binary_op : int {
#define RUNNEL_BINARY_ENUM(name, functor, kind, devices, fusion) name,
  RUNNEL_BINARY_OPS(RUNNEL_BINARY_ENUM)
#undef RUNNEL_BINARY_ENUM
};

enum class binary_kind { numbers, reals, compare, equality, logical };
enum class binary_devices { gpu, gpu_floats, cpu };

/// Whether a GPU row's CUDA kernel takes floats only: `gpu_floats` rows, and the `reals` kind.
constexpr bool gpu_floats_only(binary_kind k, binary_devices d) {
  return d == binary_devices::gpu_floats || k == binary_kind::reals;
}

/// A row as a type: what visit_binary hands its callable.
template <class F, binary_kind K, binary_devices D, bool Fused> struct binary_row {
  using functor = F;
  static constexpr binary_kind kind = K;
  static constexpr binary_devices devices = D;
  /// The fusion interpreter runs it, through the functor's `array`.
  static constexpr bool fused = Fused;
  /// Its output is bool.
  static constexpr bool boolean =
      K == binary_kind::compare || K == binary_kind::equality || K == binary_kind::logical;
};

struct binary_op_info {
  const char* name;
  binary_op op;
  binary_kind kind;
  binary_devices devices;
  bool fused; ///< _FusedElementwise runs it (float32), through the functor's `array`
};

/// The rows, as data.
inline constexpr binary_op_info binary_ops[] = {
#define RUNNEL_BINARY_INFO(name, functor, kind, devices, fusion)                                   \
  {#name, binary_op::name, binary_kind::kind, binary_devices::devices, #fusion[0] == 'f'},
    RUNNEL_BINARY_OPS(RUNNEL_BINARY_INFO)
#undef RUNNEL_BINARY_INFO
};

/// Calls `f.template operator()<binary_row<...>>()` with the row of `op` and returns what it
/// returns. The switch is generated from the rows: no case can be forgotten.
template <class F> auto visit_binary(binary_op op, F&& f) {
  switch (op) {
#define RUNNEL_BINARY_CASE(name, functor, kind, devices, fusion)                                   \
  case binary_op::name:                                                                            \
    return f.template operator()<                                                                  \
        binary_row<functor, binary_kind::kind, binary_devices::devices, #fusion[0] == 'f'>>();
    RUNNEL_BINARY_OPS(RUNNEL_BINARY_CASE)
#undef RUNNEL_BINARY_CASE
  }
  // Not reached: every enumerator has its case.
  return f
      .template operator()<binary_row<op_add, binary_kind::numbers, binary_devices::gpu, true>>();
}

/// The row named `name`, or null.
inline const binary_op_info* find_binary_op(std::string_view name) {
  for (auto& b : binary_ops)
    if (name == b.name)
      return &b;
  return nullptr;
}

} // namespace runnel
