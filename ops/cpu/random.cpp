// Random kernels. Seeds follow TensorFlow: `seed` is the graph-level seed, `seed2` the op's;
// both zero means a fresh random seed. Each run draws new numbers, and the sequence over runs is
// the same for the same seeds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

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

/// Multinomial: per row of logits, `num_samples` class indices drawn with the probabilities
/// softmax(row), by inverting the row's cumulative distribution (in double). A class whose logit
/// is -inf is never drawn; a row with no finite logit, or a NaN, is an error naming it.
class multinomial_kernel : public kernel {
public:
  explicit multinomial_kernel(const kernel_construction& c)
      : out_type_(c.attr<dtype>("output_dtype")) {
    seed_engine(engine_, c);
  }

  status compute(kernel_context& ctx) override {
    const tensor& logits = ctx.input(0);
    const tensor& count = ctx.input(1);
    if (logits.rank() != 2)
      return invalid_argument("logits must be a matrix [batch, classes], got shape " +
                              logits.shape().to_string());
    if (count.rank() != 0)
      return invalid_argument("num_samples must be a scalar, got shape " +
                              count.shape().to_string());
    int64_t samples = *count.data<int32_t>();
    if (samples < 0)
      return invalid_argument("num_samples must be at least 0, got " + std::to_string(samples));
    int64_t rows = logits.dim(0), classes = logits.dim(1);
    if (classes == 0 && rows > 0 && samples > 0)
      return invalid_argument("logits must have at least one class, got shape " +
                              logits.shape().to_string());
    tensor& out = ctx.allocate_output(0, out_type_, shape{rows, samples});
    std::vector<double> cdf(static_cast<size_t>(classes));
    std::vector<int64_t> drawn(static_cast<size_t>(samples));
    for (int64_t r = 0; r < rows; ++r) {
      RUNNEL_RETURN_IF_ERROR(logits.type() == dtype::f64
                                 ? row_cdf(logits.data<double>() + r * classes, r, cdf)
                                 : row_cdf(logits.data<float>() + r * classes, r, cdf));
      std::uniform_real_distribution<double> uniform(0.0, cdf.back());
      for (auto& d : drawn) {
        // The first class whose cumulative mass passes the draw; a draw that rounding put at
        // the total goes to the last class with any mass.
        auto it = std::upper_bound(cdf.begin(), cdf.end(), uniform(engine_));
        if (it == cdf.end())
          it = std::lower_bound(cdf.begin(), cdf.end(), cdf.back());
        d = int64_t(it - cdf.begin());
      }
      if (out_type_ == dtype::i32)
        std::copy(drawn.begin(), drawn.end(), out.data<int32_t>() + r * samples);
      else
        std::copy(drawn.begin(), drawn.end(), out.data<int64_t>() + r * samples);
    }
    return {};
  }

private:
  /// The cumulative sums of exp(x - max x) over row `r`.
  template <class T> static status row_cdf(const T* x, int64_t r, std::vector<double>& cdf) {
    double top = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < cdf.size(); ++j) {
      if (std::isnan(x[j]))
        return invalid_argument("row " + std::to_string(r) + " of the logits holds a NaN");
      top = std::max(top, double(x[j]));
    }
    if (!std::isfinite(top))
      return invalid_argument("row " + std::to_string(r) + " of the logits has no finite value " +
                              "(every class -inf, or one +inf)");
    double sum = 0;
    for (size_t j = 0; j < cdf.size(); ++j)
      cdf[j] = sum += std::exp(double(x[j]) - top);
    return {};
  }

  dtype out_type_;
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
    reg.add("Multinomial", cpu, reals, make_kernel<multinomial_kernel>);
  }
}

} // namespace runnel
