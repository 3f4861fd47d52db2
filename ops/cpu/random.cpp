// Random kernels. Seeds follow TensorFlow: `seed` is the graph-level seed, `seed2` the op's;
// both zero means a fresh random seed. Each run draws new numbers, and the sequence over runs is
// the same for the same seeds.
#include <random>

#include <numeric>
#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {
namespace {

enum class distribution { uniform, normal, truncated_normal };

class random_kernel : public kernel {
public:
  random_kernel(const kernel_construction& c, distribution d)
      : dist_(d), type_(c.attr<dtype>("dtype")) {
    seed_engine(engine_, c);
  }

  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto dims, to_int64_vector(ctx.input(0)));
    for (auto d : dims)
      if (d < 0)
        return invalid_argument("shape holds a negative dimension " + std::to_string(d));
    tensor& out = ctx.allocate_output(0, type_, shape(dims));
    int64_t n = out.num_elements();
    auto fill = [&](auto* p) {
      using T = std::remove_pointer_t<decltype(p)>;
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
      std::normal_distribution<double> normal(0.0, 1.0);
      for (int64_t i = 0; i < n; ++i) {
        double v;
        switch (dist_) {
          case distribution::uniform:
            v = uniform(engine_);
            break;
          case distribution::normal:
            v = normal(engine_);
            break;
          default:
            do
              v = normal(engine_);
            while (v < -2.0 || v > 2.0);
        }
        p[i] = T(v);
      }
    };
    if (type_ == dtype::f64)
      fill(out.data<double>());
    else
      fill(out.data<float>());
    return {};
  }

private:
  distribution dist_;
  dtype type_;
  std::mt19937_64 engine_;
};


class random_shuffle_kernel : public kernel {
public:
  explicit random_shuffle_kernel(const kernel_construction& c) {
    auto seed = uint64_t(c.attr<int64_t>("seed")), seed2 = uint64_t(c.attr<int64_t>("seed2"));
    if (seed == 0 && seed2 == 0)
      engine_.seed(std::random_device{}());
    else
      engine_.seed(seed * 0x9E3779B97F4A7C15ull ^ seed2);
  }
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    if (x.rank() == 0) {
      ctx.set_output(0, x);
      return {};
    }
    std::vector<int64_t> order(static_cast<size_t>(x.dim(0)));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), engine_);
    tensor& out = ctx.allocate_output(0, x.type(), x.shape());
    int64_t row = x.dim(0) ? x.num_elements() / x.dim(0) : 0;
    return dispatch(x.type(), [&]<class T>() -> status {
      for (size_t i = 0; i < order.size(); ++i)
        std::copy_n(x.data<T>() + order[i] * row, row, out.data<T>() + int64_t(i) * row);
      return {};
    });
  }

private:
  std::mt19937_64 engine_;
};

} // namespace

void seed_engine(std::mt19937_64& engine, const kernel_construction& c) {
  auto seed = uint64_t(c.attr<int64_t>("seed")), seed2 = uint64_t(c.attr<int64_t>("seed2"));
  if (seed == 0 && seed2 == 0) {
    std::random_device rd;
    engine.seed((uint64_t(rd()) << 32) | rd());
  } else {
    std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(seed2),
                      uint32_t(seed2 >> 32)};
    engine.seed(seq);
  }
}

RUNNEL_KERNEL_FAMILY(random) {
  const std::vector<std::pair<const char*, distribution>> kinds{
      {"RandomUniform", distribution::uniform},
      {"RandomStandardNormal", distribution::normal},
      {"TruncatedNormal", distribution::truncated_normal}};
  for (auto [op, d] : kinds)
    reg.add(
        op, device_type::cpu, {dtype::f32, dtype::f64},
        [d = d](const kernel_construction& c) {
          return result<std::unique_ptr<kernel>>(std::make_unique<random_kernel>(c, d));
        },
        "dtype");
  {
    auto cpu = device_type::cpu;
    const std::vector<dtype> reals{dtype::f32, dtype::f64};
    reg.add("RandomShuffle", cpu, {}, make_kernel<random_shuffle_kernel>);
  }
}

} // namespace runnel
