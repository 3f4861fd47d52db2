// Neural-network kernels: BiasAdd, Softmax, SoftmaxCrossEntropyWithLogits and its sparse form.
#include <algorithm>
#include <cmath>

#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/cpu/unary_wide.hpp"

namespace runnel {
namespace {

class bias_add_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& v = ctx.input(0);
    const tensor& b = ctx.input(1);
    if (v.rank() < 1 || b.rank() != 1 || b.dim(0) != v.dim(v.rank() - 1))
      return invalid_argument("bias of shape " + b.shape().to_string() +
                              " does not match the last dimension of value " +
                              v.shape().to_string());
    tensor& out = ctx.forward_or_allocate_output(0, 0, v.type(), v.shape());
    int64_t c = b.dim(0), rows = c == 0 ? 0 : v.num_elements() / c;
    return dispatch_number(v.type(), [&]<class T>() -> status {
      const T* x = v.data<T>();
      const T* bias = b.data<T>();
      T* o = out.data<T>();
      ctx.cpu().parallel_for(rows,
                             std::max<int64_t>(1, elementwise_grain / std::max<int64_t>(c, 1)),
                             [&](int64_t rb, int64_t re) {
                               for (int64_t r = rb; r < re; ++r)
                                 for (int64_t j = 0; j < c; ++j)
                                   o[r * c + j] = x[r * c + j] + bias[j];
                             });
      return {};
    });
  }
};

/// y[j] = exp(y[j]) over n values: float32 through the unary rows' vectorised code
/// (ops/cpu/unary_wide.hpp; the C library's scalar exp costs several ns a value).
template <class T> void exp_in_place(T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    unary_f32(unary_op::Exp, y, y, n);
  } else {
    for (int64_t j = 0; j < n; ++j)
      y[j] = std::exp(y[j]);
  }
}

/// log-sum-exp softmax of each row of [rows, cols]; writes probabilities, and each row's
/// log-sum-exp (log of the sum of exp over the row) to `log_sum_exp` if given.
template <class T>
void softmax_rows(const T* in, T* out, int64_t rows, int64_t cols, T* log_sum_exp = nullptr) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = in + r * cols;
    T* y = out + r * cols;
    T m = x[0];
    for (int64_t j = 1; j < cols; ++j)
      m = std::max(m, x[j]);
    for (int64_t j = 0; j < cols; ++j)
      y[j] = x[j] - m;
    exp_in_place(y, cols);
    T sum = 0;
    for (int64_t j = 0; j < cols; ++j)
      sum += y[j];
    T inv = T(1) / sum;
    for (int64_t j = 0; j < cols; ++j)
      y[j] *= inv;
    if (log_sum_exp)
      log_sum_exp[r] = std::log(sum) + m;
  }
}

class softmax_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    if (x.rank() < 1)
      return invalid_argument("logits must have rank at least 1");
    tensor& y = ctx.allocate_output(0, x.type(), x.shape());
    int64_t cols = x.dim(x.rank() - 1);
    if (cols == 0)
      return {};
    int64_t rows = x.num_elements() / cols;
    return dispatch_number(x.type(), [&]<class T>() -> status {
      if constexpr (std::is_floating_point_v<T>) {
        ctx.cpu().parallel_for(rows, std::max<int64_t>(1, 8192 / cols), [&](int64_t b, int64_t e) {
          softmax_rows(x.data<T>() + b * cols, y.data<T>() + b * cols, e - b, cols);
        });
      }
      return {};
    });
  }
};

/// Row r's loss from its log-sum-exp (in l[r]) and the labels; the labels' part of its
/// gradient subtracted from the softmax in g (SoftmaxCrossEntropyWithLogits and its sparse form).
template <class T>
void xent_loss_row(bool sparse, int64_t r, int64_t cols, const T* x, const tensor& labels,
                   const std::vector<int64_t>& sparse_labels, T* l, T* g) {
  const T* xr = x + r * cols;
  T* gr = g + r * cols;
  T log_sum = l[r];
  T acc = 0;
  if (sparse) {
    int64_t k = sparse_labels[size_t(r)];
    acc = log_sum - xr[k];
    gr[k] -= T(1);
  } else {
    const T* yr = labels.data<T>() + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      if (yr[j] != T(0))
        acc += yr[j] * (log_sum - xr[j]);
      gr[j] -= yr[j];
    }
  }
  l[r] = acc;
}

class xent_kernel : public kernel {
public:
  explicit xent_kernel(bool sparse) : sparse_(sparse) {}

  status compute(kernel_context& ctx) override {
    const tensor& logits = ctx.input(0);
    const tensor& labels = ctx.input(1);
    if (logits.rank() != 2)
      return invalid_argument("logits must be a matrix, got shape " + logits.shape().to_string());
    int64_t rows = logits.dim(0), cols = logits.dim(1);
    if (cols == 0 && rows > 0) // TensorFlow's rule too: no class, no probability to take
      return invalid_argument("logits must have at least one class, got shape " +
                              logits.shape().to_string());
    if (sparse_) {
      if (labels.rank() != 1 || labels.dim(0) != rows)
        return invalid_argument("labels of shape " + labels.shape().to_string() +
                                " do not match logits of shape " + logits.shape().to_string());
    } else if (!(labels.shape() == logits.shape())) {
      return invalid_argument("logits and labels must have the same shape, got " +
                              logits.shape().to_string() + " and " + labels.shape().to_string());
    }
    std::vector<int64_t> sparse_labels;
    if (sparse_) {
      RUNNEL_ASSIGN_OR_RETURN(sparse_labels, to_int64_vector(labels));
      for (int64_t r = 0; r < rows; ++r)
        if (sparse_labels[size_t(r)] < 0 || sparse_labels[size_t(r)] >= cols)
          return invalid_argument("received a label value of " +
                                  std::to_string(sparse_labels[size_t(r)]) + " in row " +
                                  std::to_string(r) + ", which is outside the valid range [0, " +
                                  std::to_string(cols) + ")");
    }
    tensor& loss = ctx.allocate_output(0, logits.type(), shape{rows});
    tensor& backprop = ctx.allocate_output(1, logits.type(), shape{rows, cols});
    return dispatch_number(logits.type(), [&]<class T>() -> status {
      if constexpr (std::is_floating_point_v<T>) {
        const T* x = logits.data<T>();
        T* l = loss.data<T>();
        T* g = backprop.data<T>();
        // The loss is log-sum-exp - logit: written to l by the softmax, then adjusted per row.
        auto row_range = [&](int64_t b, int64_t e) {
          softmax_rows(x + b * cols, g + b * cols, e - b, cols, l + b);
          for (int64_t r = b; r < e; ++r)
            xent_loss_row(sparse_, r, cols, x, labels, sparse_labels, l, g);
        };
        if (ctx.has_cpu())
          ctx.cpu().parallel_for(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(cols, 1)),
                                 row_range);
        else
          row_range(0, rows);
      }
      return {};
    });
  }

private:
  bool sparse_;
};


class log_softmax_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    if (x.rank() < 1)
      return invalid_argument("logits must have rank at least 1");
    tensor& y = ctx.allocate_output(0, x.type(), x.shape());
    int64_t cols = x.dim(x.rank() - 1), rows = cols ? x.num_elements() / cols : 0;
    return dispatch_number(x.type(), [&]<class T>() -> status {
      if constexpr (std::is_floating_point_v<T>) {
        std::vector<T> e(static_cast<size_t>(cols));
        for (int64_t r = 0; r < rows; ++r) {
          const T* in = x.data<T>() + r * cols;
          T* out = y.data<T>() + r * cols;
          T m = *std::max_element(in, in + cols), s = 0;
          for (int64_t j = 0; j < cols; ++j)
            e[size_t(j)] = in[j] - m;
          exp_in_place(e.data(), cols);
          for (int64_t j = 0; j < cols; ++j)
            s += e[size_t(j)];
          T lse = m + std::log(s);
          for (int64_t j = 0; j < cols; ++j)
            out[j] = in[j] - lse;
        }
      }
      return {};
    });
  }
};

class l2_loss_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    tensor& y = ctx.allocate_output(0, x.type(), shape{});
    return dispatch_number(x.type(), [&]<class T>() -> status {
      double s = 0;
      for (auto v : x.flat<T>())
        s += double(v) * double(v);
      *y.data<T>() = T(s / 2);
      return {};
    });
  }
};

class in_top_k_kernel : public kernel {
public:
  explicit in_top_k_kernel(const kernel_construction& c) : k_(c.attr<int64_t>("k")) {}
  status compute(kernel_context& ctx) override {
    const tensor& p = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto targets, to_int64_vector(ctx.input(1)));
    if (p.rank() != 2 || int64_t(targets.size()) != p.dim(0))
      return invalid_argument("predictions " + p.shape().to_string() + " and targets [" +
                              std::to_string(targets.size()) + "] do not match");
    int64_t classes = p.dim(1);
    tensor& out = ctx.allocate_output(0, dtype::boolean, shape{p.dim(0)});
    for (int64_t r = 0; r < p.dim(0); ++r) {
      int64_t t = targets[size_t(r)];
      const float* row = p.data<float>() + r * classes;
      bool in = false;
      if (t >= 0 && t < classes && std::isfinite(row[t])) {
        int64_t above = 0; // ties with the target count as inside the top k, as in TensorFlow
        for (int64_t j = 0; j < classes; ++j)
          above += row[j] > row[t];
        in = above < k_;
      }
      out.data<bool>()[r] = in;
    }
    return {};
  }

private:
  int64_t k_;
};

class top_k_kernel : public kernel {
public:
  explicit top_k_kernel(const kernel_construction&) {}
  status compute(kernel_context& ctx) override {
    return ctx.input(0).type() == dtype::f64 ? run<double>(ctx) : run<float>(ctx);
  }

private:
  template <class T> status run(kernel_context& ctx) {
    const tensor& x = ctx.input(0);
    const tensor& kt = ctx.input(1);
    if (x.rank() < 1 || kt.num_elements() != 1)
      return invalid_argument("TopKV2: input " + x.shape().to_string() +
                              " needs a rank of at least 1 and k one value");
    int64_t k = *kt.data<int32_t>(), n = x.dim(x.rank() - 1);
    if (k < 0 || k > n)
      return invalid_argument("TopKV2: k = " + std::to_string(k) + " for rows of " +
                              std::to_string(n) + " entries (input " + x.shape().to_string() +
                              ")");
    std::vector<int64_t> dims = x.shape().dims();
    dims.back() = k;
    tensor& values = ctx.allocate_output(0, x.type(), shape(dims));
    tensor& indices = ctx.allocate_output(1, dtype::i32, shape(dims));
    int64_t rows = n == 0 ? 0 : x.num_elements() / n;
    std::vector<int32_t> order(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x.data<T>() + r * n;
      for (int64_t j = 0; j < n; ++j)
        order[size_t(j)] = int32_t(j);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      for (int64_t j = 0; j < k; ++j) {
        values.data<T>()[r * k + j] = row[order[size_t(j)]];
        indices.data<int32_t>()[r * k + j] = order[size_t(j)];
      }
    }
    return {};
  }
};

} // namespace

RUNNEL_KERNEL_FAMILY(nn) {
  reg.add("BiasAdd", device_type::cpu, {dtype::f32, dtype::f64, dtype::i32, dtype::i64},
          make_simple_kernel<bias_add_kernel>);
  reg.add("Softmax", device_type::cpu, {dtype::f32, dtype::f64},
          make_simple_kernel<softmax_kernel>);
  reg.add("SoftmaxCrossEntropyWithLogits", device_type::cpu, {dtype::f32, dtype::f64},
          [](const kernel_construction&) {
            return result<std::unique_ptr<kernel>>(std::make_unique<xent_kernel>(false));
          });
  reg.add("SparseSoftmaxCrossEntropyWithLogits", device_type::cpu, {dtype::f32, dtype::f64},
          [](const kernel_construction&) {
            return result<std::unique_ptr<kernel>>(std::make_unique<xent_kernel>(true));
          });
  {
    auto cpu = device_type::cpu;
    const std::vector<dtype> reals{dtype::f32, dtype::f64};
    reg.add("LogSoftmax", cpu, reals, make_simple_kernel<log_softmax_kernel>);
    reg.add("L2Loss", cpu, reals, make_simple_kernel<l2_loss_kernel>);
    reg.add("InTopK", cpu, {}, make_kernel<in_top_k_kernel>);
    reg.add("TopKV2", cpu, reals, make_kernel<top_k_kernel>);
  }
}

} // namespace runnel
