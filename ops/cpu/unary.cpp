// Unary element-wise kernels: math (the functors of ops/core/math_functors.hpp, vectorised through
// Eigen where it has them), Cast between every pair of types, AddN, ZerosLike and OnesLike.
#include <algorithm>
#include <array>

#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/core/eigen_access.hpp"
#include "runnel/ops/core/math_functors.hpp"

namespace runnel {
namespace {

enum class unary_kind {
  neg,
  exp,
  log,
  sqrt,
  square,
  tanh,
  sigmoid,
  relu,
  abs,
  sign,
  log1p,
  rsqrt,
  reciprocal,
  sin,
  cos,
  relu6,
  elu,
  softplus,
  floor
};

class unary_kernel : public kernel {
public:
  explicit unary_kernel(unary_kind kind) : kind_(kind) {}

  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    tensor& y = ctx.forward_or_allocate_output(0, 0, x.type(), x.shape());
    return dispatch_number(x.type(), [&]<class T>() -> status {
      const T* in = x.data<T>();
      T* out = y.data<T>();
      // Chunks are mapped as Eigen arrays: Eigen vectorises exp, log, tanh and the logistic
      // function, which the C library does not.
      ctx.cpu().parallel_for(x.num_elements(), elementwise_grain / 4, [&](int64_t b, int64_t e) {
        Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> v(in + b, e - b);
        Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> r(out + b, e - b);
        switch (kind_) {
          case unary_kind::neg:
            r = -v;
            break;
          case unary_kind::square:
            r = v.square();
            break;
          case unary_kind::relu:
            r = v.max(T(0));
            break;
          case unary_kind::abs:
            r = v.abs();
            break;
          case unary_kind::sign:
            r = (v > T(0)).template cast<T>() - (v < T(0)).template cast<T>();
            break;
          case unary_kind::relu6:
            r = v.max(T(0)).min(T(6));
            break;
          default:
            if constexpr (std::is_floating_point_v<T>) {
              switch (kind_) {
                case unary_kind::exp:
                  r = v.exp();
                  break;
                case unary_kind::log:
                  r = v.log();
                  break;
                case unary_kind::sqrt:
                  r = v.sqrt();
                  break;
                case unary_kind::tanh:
                  r = v.tanh();
                  break;
                case unary_kind::sigmoid:
                  r = v.logistic();
                  break;
                case unary_kind::log1p:
                  r = v.log1p();
                  break;
                case unary_kind::rsqrt:
                  r = v.rsqrt();
                  break;
                case unary_kind::reciprocal:
                  r = v.inverse();
                  break;
                case unary_kind::sin:
                  r = v.sin();
                  break;
                case unary_kind::cos:
                  r = v.cos();
                  break;
                case unary_kind::floor:
                  r = v.floor();
                  break;
                case unary_kind::elu:
                  r = (v > T(0)).select(v, v.exp() - T(1));
                  break;
                case unary_kind::softplus:
                  // log(1 + e^x) without overflow: x + log1p(e^-x) for large x.
                  r = (v > T(0)).select(v + (-v).exp().log1p(), v.exp().log1p());
                  break;
                default:
                  break;
              }
            }
        }
      });
      return {};
    });
  }

private:
  unary_kind kind_;
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

void register_unary_kernels(kernel_registry& reg) {
  const std::vector<dtype> numbers{dtype::f32, dtype::f64, dtype::i32, dtype::i64};
  auto cpu = device_type::cpu;
  const std::vector<std::pair<const char*, unary_kind>> unaries{
      {"Neg", unary_kind::neg},
      {"Exp", unary_kind::exp},
      {"Log", unary_kind::log},
      {"Sqrt", unary_kind::sqrt},
      {"Square", unary_kind::square},
      {"Tanh", unary_kind::tanh},
      {"Sigmoid", unary_kind::sigmoid},
      {"Relu", unary_kind::relu},
      {"Abs", unary_kind::abs},
      {"Sign", unary_kind::sign},
      {"Log1p", unary_kind::log1p},
      {"Rsqrt", unary_kind::rsqrt},
      {"Reciprocal", unary_kind::reciprocal},
      {"Sin", unary_kind::sin},
      {"Cos", unary_kind::cos},
      {"Relu6", unary_kind::relu6},
      {"Elu", unary_kind::elu},
      {"Softplus", unary_kind::softplus},
      {"Floor", unary_kind::floor}};
  for (auto [op, kind] : unaries)
    reg.add(op, cpu, numbers, [kind = kind](const kernel_construction&) {
      return result<std::unique_ptr<kernel>>(std::make_unique<unary_kernel>(kind));
    });
  reg.add("Cast", device_type::cpu, {}, make_kernel<cast_kernel>);
  reg.add("AddN", device_type::cpu, numbers, make_simple_kernel<add_n_kernel>);
  reg.add("ZerosLike", device_type::cpu, {}, [](const kernel_construction&) {
    return result<std::unique_ptr<kernel>>(std::make_unique<fill_like_kernel>(0.0));
  });
  reg.add("OnesLike", device_type::cpu, {}, [](const kernel_construction&) {
    return result<std::unique_ptr<kernel>>(std::make_unique<fill_like_kernel>(1.0));
  });
}

} // namespace runnel

