// Unary element-wise kernels: the rows of ops/core/unary_ops.hpp (each functor's Eigen form, so
// vectorised), Cast between every pair of types, AddN, ZerosLike and OnesLike.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "runnel/ops/core/eigen_access.hpp"
#include "runnel/ops/core/math_functors.hpp"
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/cpu/unary_wide.hpp"

namespace runnel {

namespace {

#if defined(__x86_64__)
const int wide_isa = [] {
  __builtin_cpu_init(); // a static initializer may run before libgcc's own
  // RUNNEL_NO_WIDE_VECTORS=1: the baseline's code, for comparisons.
  const char* off = std::getenv("RUNNEL_NO_WIDE_VECTORS");
  if (off && *off && std::string_view(off) != "0")
    return 0;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return 2;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
}();
#else
const int wide_isa = 0;
#endif

} // namespace

bool unary_f32_wide(unary_op op, const float* x, float* y, int64_t n) {
  if (wide_isa == 2)
    avx512::unary_f32(op, x, y, n);
  else if (wide_isa == 1)
    avx2::unary_f32(op, x, y, n);
  return wide_isa > 0;
}

void unary_f32(unary_op op, const float* x, float* y, int64_t n) {
  if (unary_f32_wide(op, x, y, n))
    return;
  Eigen::Map<const Eigen::ArrayXf> v(x, n);
  Eigen::Map<Eigen::ArrayXf> r(y, n);
  visit_unary(op, [&]<class F>() { r = F::array(v); });
}

const char* unary_wide_isa() {
  return wide_isa == 2 ? "avx512" : wide_isa == 1 ? "avx2" : "";
}

namespace {

/// A row of RUNNEL_UNARY_OPS (ops/core/unary_ops.hpp) through its functor's Eigen form.
class unary_kernel : public kernel {
public:
  explicit unary_kernel(unary_op op) : op_(op) {}

  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    tensor& y = ctx.forward_or_allocate_output(0, 0, x.type(), x.shape());
    return dispatch_number(x.type(), [&]<class T>() -> status {
      const T* in = x.data<T>();
      T* out = y.data<T>();
      // Chunks are mapped as Eigen arrays: Eigen vectorises exp, log, tanh and the logistic
      // function, which the C library does not.
      // Integer dtypes are registered only for the `numbers` rows.
      return visit_unary(op_, [&]<class F>() -> status {
        ctx.cpu().parallel_for(x.num_elements(), elementwise_grain / 4, [&](int64_t b, int64_t e) {
          if constexpr (std::is_same_v<T, float>) {
            unary_f32(op_, in + b, out + b, e - b);
            return;
          }
          Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> v(in + b, e - b);
          Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> r(out + b, e - b);
          if constexpr (std::is_floating_point_v<T>)
            r = F::array(v);
          else
            for (int64_t i = 0; i < e - b; ++i) // the integer rows: exact, element by element
              r[i] = F::apply(v[i]);
        });
        return {};
      });
    });
  }

private:
  unary_op op_;
};

/// _UnaryGrad: dx = grad(x, y, dy) of a row whose functor gives one (float32, float64).
class unary_grad_kernel : public kernel {
public:
  explicit unary_grad_kernel(const kernel_construction& c) {
    auto* row = find_unary_op(c.attr<std::string>("op"));
    if (!row || !row->has_grad)
      init_ = invalid_argument("_UnaryGrad: '" + c.attr<std::string>("op") +
                               "' has no gradient functor");
    else
      op_ = row->op;
  }

  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    RUNNEL_RETURN_IF_ERROR(init_);
    const tensor &x = ctx.input(0), &y = ctx.input(1), &dy = ctx.input(2);
    if (!(x.shape() == dy.shape()) || !(y.shape() == dy.shape()))
      return invalid_argument("_UnaryGrad: x " + x.shape().to_string() + ", y " +
                              y.shape().to_string() + " and dy " + dy.shape().to_string() +
                              " must have one shape");
    tensor& dx = ctx.allocate_output(0, x.type(), x.shape());
    auto typed = [&]<class T>() -> status {
      using A = Eigen::Array<T, Eigen::Dynamic, 1>;
      return visit_unary(op_, [&]<class F>() -> status {
        if constexpr (has_unary_grad<F>) {
          ctx.cpu().parallel_for(
              x.num_elements(), elementwise_grain / 4, [&](int64_t b, int64_t e) {
                Eigen::Map<const A> xs(x.data<T>() + b, e - b), ys(y.data<T>() + b, e - b),
                    dys(dy.data<T>() + b, e - b);
                Eigen::Map<A>(dx.data<T>() + b, e - b) = F::grad_array(xs, ys, dys);
              });
          return {};
        } else {
          return internal_error("_UnaryGrad: no gradient functor"); // the constructor checked
        }
      });
    };
    return x.type() == dtype::f64 ? typed.template operator()<double>()
                                  : typed.template operator()<float>();
  }

private:
  status init_;
  unary_op op_{};
};

template <class To, class From> To convert(const From& v) {
  if constexpr (std::is_same_v<From, half> || std::is_same_v<From, bfloat16>)
    return convert<To>(float(v));
  else if constexpr (std::is_same_v<To, half> || std::is_same_v<To, bfloat16>)
    return To(float(v));
  else if constexpr (std::is_same_v<To, bool>)
    return v != From(0);
  else
    return To(v);
}

class cast_kernel : public kernel {
public:
  explicit cast_kernel(const kernel_construction& c) : to_(c.attr<dtype>("DstT")) {}
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    if (x.type() == to_) {
      ctx.set_output(0, x);
      return {};
    }
    // The mixed-precision casts: vectorised and split over the device's threads.
    cpu_device* cpu = ctx.has_cpu() ? &ctx.cpu() : nullptr;
    if (x.type() == dtype::f32 && (to_ == dtype::f16 || to_ == dtype::bf16)) {
      ctx.set_output(0, narrow_from_f32(x, to_, cpu));
      return {};
    }
    if ((x.type() == dtype::f16 || x.type() == dtype::bf16) && to_ == dtype::f32) {
      ctx.set_output(0, widen_to_f32(x, cpu));
      return {};
    }
    tensor& y = ctx.allocate_output(0, to_, x.shape());
    int64_t n = x.num_elements();
    return dispatch(x.type(), [&]<class From>() -> status {
      if constexpr (std::is_same_v<From, std::string>) {
        return unimplemented("cannot cast strings");
      } else {
        return dispatch(to_, [&]<class To>() -> status {
          if constexpr (std::is_same_v<To, std::string>) {
            return unimplemented("cannot cast to string");
          } else {
            const From* in = x.data<From>();
            To* out = y.data<To>();
            for (int64_t i = 0; i < n; ++i)
              out[i] = convert<To>(in[i]);
            return {};
          }
        });
      }
    });
  }

private:
  dtype to_;
};

class add_n_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& first = ctx.input(0);
    for (int i = 1; i < ctx.num_inputs(); ++i)
      if (!(ctx.input(i).shape() == first.shape()))
        return invalid_argument("input " + std::to_string(i) + " has shape " +
                                ctx.input(i).shape().to_string() + " but input 0 has " +
                                first.shape().to_string() + " (AddN does not broadcast)");
    tensor& out = ctx.allocate_output(0, first.type(), first.shape());
    return dispatch_number(first.type(), [&]<class T>() -> status {
      T* o = out.data<T>();
      ctx.cpu().parallel_for(first.num_elements(), elementwise_grain, [&](int64_t b, int64_t e) {
        const T* x0 = ctx.input(0).data<T>();
        for (int64_t j = b; j < e; ++j)
          o[j] = x0[j];
        for (int i = 1; i < ctx.num_inputs(); ++i) {
          const T* x = ctx.input(i).data<T>();
          for (int64_t j = b; j < e; ++j)
            o[j] += x[j];
        }
      });
      return {};
    });
  }
};

class fill_like_kernel : public kernel {
public:
  explicit fill_like_kernel(double value) : value_(value) {}
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    tensor& y = ctx.allocate_output(0, x.type(), x.shape());
    return dispatch(x.type(), [&]<class T>() -> status {
      if constexpr (std::is_same_v<T, std::string>) {
        return unimplemented("strings");
      } else {
        T v = convert<T>(value_);
        std::fill_n(y.data<T>(), y.num_elements(), v);
        return {};
      }
    });
  }

private:
  double value_;
};

} // namespace

double measure_transcendental_rate() {
  constexpr int64_t n = 16384; // 64 KB in, 64 KB out: in cache, as most activations' chunks are
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[size_t(i)] = float(i % 200) * 0.02f - 2.f;
  double best = 1e9;
  for (int rep = 0; rep < 8; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    unary_f32(unary_op::Tanh, x.data(), y.data(), n);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return double(n) / std::max(best, 1e-9);
}

RUNNEL_KERNEL_FAMILY_PART(math, unary) {
  const std::vector<dtype> numbers{dtype::f32, dtype::f64, dtype::i32, dtype::i64};
  auto cpu = device_type::cpu;
  for (auto& u : unary_ops)
    reg.add(u.name, cpu, u.integers ? numbers : std::vector<dtype>{dtype::f32, dtype::f64},
            [op = u.op](const kernel_construction&) {
              return result<std::unique_ptr<kernel>>(std::make_unique<unary_kernel>(op));
            });
  reg.add("_UnaryGrad", cpu, {dtype::f32, dtype::f64}, make_kernel<unary_grad_kernel>);
  reg.add("Cast", device_type::cpu, {}, make_kernel<cast_kernel>);
  reg.add("AddN", device_type::cpu, numbers, make_simple_kernel<add_n_kernel>);
}

/// ZerosLike and OnesLike (defined with the array ops).
RUNNEL_KERNEL_FAMILY_PART(array, fill_like) {
  reg.add("ZerosLike", device_type::cpu, {}, [](const kernel_construction&) {
    return result<std::unique_ptr<kernel>>(std::make_unique<fill_like_kernel>(0.0));
  });
  reg.add("OnesLike", device_type::cpu, {}, [](const kernel_construction&) {
    return result<std::unique_ptr<kernel>>(std::make_unique<fill_like_kernel>(1.0));
  });
}

} // namespace runnel
