// FusedBatchNorm and FusedBatchNormGrad over channels-last data viewed as [rows, channels]:
// statistics per channel in double, then one pass to normalise.
#include <cmath>

#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {
namespace {

struct layout {
  int64_t rows = 0, channels = 0;
};

result<layout> view(const tensor& x, const std::vector<const tensor*>& vectors) {
  if (x.rank() < 2)
    return invalid_argument("x must have rank at least 2 (channels last), got " +
                            x.shape().to_string());
  layout l{0, x.dim(x.rank() - 1)};
  l.rows = l.channels == 0 ? 0 : x.num_elements() / l.channels;
  for (size_t i = 0; i < vectors.size(); ++i)
    if (vectors[i]->rank() != 1 || vectors[i]->dim(0) != l.channels)
      return invalid_argument("input " + std::to_string(i + 1) + " has shape " +
                              vectors[i]->shape().to_string() + "; x has " +
                              std::to_string(l.channels) + " channels");
  return l;
}

class batch_norm_kernel : public kernel {
public:
  explicit batch_norm_kernel(const kernel_construction& c)
      : epsilon_(c.attr<double>("epsilon")), training_(c.attr<bool>("is_training")) {}

  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto l,
                            view(x, {&ctx.input(1), &ctx.input(2), &ctx.input(3), &ctx.input(4)}));
    if (training_ && l.rows == 0)
      return invalid_argument("batch normalization in training needs a non-empty batch");
    int64_t m = l.rows, n = l.channels;
    const float* in = x.data<float>();
    const float* scale = ctx.input(1).data<float>();
    const float* offset = ctx.input(2).data<float>();
    std::vector<double> mean(static_cast<size_t>(n), 0.0), var(static_cast<size_t>(n), 0.0);
    if (training_) {
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < n; ++c)
          mean[size_t(c)] += in[r * n + c];
      for (auto& v : mean)
        v /= double(m);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < n; ++c) {
          double d = in[r * n + c] - mean[size_t(c)];
          var[size_t(c)] += d * d;
        }
      for (auto& v : var)
        v /= double(m);
    } else {
      for (int64_t c = 0; c < n; ++c) {
        mean[size_t(c)] = ctx.input(3).data<float>()[c];
        var[size_t(c)] = ctx.input(4).data<float>()[c];
      }
    }
    tensor& y = ctx.allocate_output(0, dtype::f32, x.shape());
    float* out = y.data<float>();
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n)); // y = x · a + b
    for (int64_t c = 0; c < n; ++c) {
      double inv = 1.0 / std::sqrt(var[size_t(c)] + epsilon_);
      a[size_t(c)] = float(scale[c] * inv);
      b[size_t(c)] = float(offset[c] - mean[size_t(c)] * scale[c] * inv);
    }
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c)
        out[r * n + c] = in[r * n + c] * a[size_t(c)] + b[size_t(c)];
    float* bm = ctx.allocate_output(1, dtype::f32, shape{n}).data<float>();
    float* bv = ctx.allocate_output(2, dtype::f32, shape{n}).data<float>();
    float* r1 = ctx.allocate_output(3, dtype::f32, shape{n}).data<float>();
    float* r2 = ctx.allocate_output(4, dtype::f32, shape{n}).data<float>();
    for (int64_t c = 0; c < n; ++c) {
      bm[c] = r1[c] = float(mean[size_t(c)]);
      // The unbiased variance, what moving averages track (TensorFlow's batch_variance).
      bv[c] =
          float(training_ && m > 1 ? var[size_t(c)] * double(m) / double(m - 1) : var[size_t(c)]);
      r2[c] = float(1.0 / std::sqrt(var[size_t(c)] + epsilon_));
    }
    return {};
  }

private:
  double epsilon_;
  bool training_;
};

class batch_norm_grad_kernel : public kernel {
public:
  explicit batch_norm_grad_kernel(const kernel_construction& c)
      : training_(c.attr<bool>("is_training")) {}

  status compute(kernel_context& ctx) override {
    const tensor& dy = ctx.input(0);
    const tensor& x = ctx.input(1);
    RUNNEL_ASSIGN_OR_RETURN(auto l, view(x, {&ctx.input(2), &ctx.input(3), &ctx.input(4)}));
    if (!(dy.shape() == x.shape()))
      return invalid_argument("y_backprop has shape " + dy.shape().to_string() + " but x has " +
                              x.shape().to_string());
    int64_t m = l.rows, n = l.channels;
    const float *g = dy.data<float>(), *in = x.data<float>();
    const float* scale = ctx.input(2).data<float>();
    const float* mean = ctx.input(3).data<float>();
    const float* inv = ctx.input(4).data<float>();
    std::vector<double> dscale(static_cast<size_t>(n), 0.0), doffset(static_cast<size_t>(n), 0.0);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double xhat = (in[r * n + c] - mean[c]) * inv[c];
        dscale[size_t(c)] += g[r * n + c] * xhat;
        doffset[size_t(c)] += g[r * n + c];
      }
    float* dx = ctx.allocate_output(0, dtype::f32, x.shape()).data<float>();
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double k = scale[c] * inv[c];
        if (!training_) { // the statistics were inputs, not functions of x
          dx[r * n + c] = float(g[r * n + c] * k);
          continue;
        }
        double xhat = (in[r * n + c] - mean[c]) * inv[c];
        dx[r * n + c] =
            float(k / double(m) *
                  (double(m) * g[r * n + c] - doffset[size_t(c)] - xhat * dscale[size_t(c)]));
      }
    float* ds = ctx.allocate_output(1, dtype::f32, shape{n}).data<float>();
    float* db = ctx.allocate_output(2, dtype::f32, shape{n}).data<float>();
    for (int64_t c = 0; c < n; ++c) {
      ds[c] = float(dscale[size_t(c)]);
      db[c] = float(doffset[size_t(c)]);
    }
    ctx.allocate_output(3, dtype::f32, shape{0});
    ctx.allocate_output(4, dtype::f32, shape{0});
    return {};
  }

private:
  bool training_;
};

} // namespace

RUNNEL_KERNEL_FAMILY(norm) {
  reg.add("FusedBatchNorm", device_type::cpu, {dtype::f32}, make_kernel<batch_norm_kernel>);
  reg.add("FusedBatchNormGrad", device_type::cpu, {dtype::f32},
          make_kernel<batch_norm_grad_kernel>);
}

} // namespace runnel
