// Reductions over axes: Sum, Mean, Max, ArgMax.
#include <algorithm>
#include <limits>

#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {

result<int64_t> read_axis(const tensor& t, int rank, const char* what) {
  RUNNEL_ASSIGN_OR_RETURN(auto v, to_int64_vector(t));
  if (v.size() != 1)
    return invalid_argument(std::string(what) + " must be a scalar, got shape " +
                            t.shape().to_string());
  int64_t a = v[0];
  if (a < -rank || a >= std::max(rank, 1))
    return invalid_argument(std::string(what) + " " + std::to_string(a) +
                            " is out of range for rank " + std::to_string(rank));
  return a < 0 ? a + rank : a;
}

namespace {

enum class reduce_kind { sum, mean, max, min, prod, all, any };

// Reduces the middle dimension of a [pre, red, post] view.
template <class T>
void reduce_middle(cpu_device& cpu, const T* in, T* out, int64_t pre, int64_t red, int64_t post,
                   reduce_kind kind) {
  auto combine = [kind](T a, T b) -> T {
    switch (kind) {
      case reduce_kind::max:
        return a > b ? a : b;
      case reduce_kind::min:
        return a < b ? a : b;
      case reduce_kind::prod:
        return T(a * b);
      case reduce_kind::all:
        return T(a && b);
      case reduce_kind::any:
        return T(a || b);
      default:
        return T(a + b);
    }
  };
  T init = T(0);
  switch (kind) {
    case reduce_kind::max:
      init = std::numeric_limits<T>::lowest();
      break;
    case reduce_kind::min:
      init = std::numeric_limits<T>::max();
      break;
    case reduce_kind::prod:
    case reduce_kind::all:
      init = T(1);
      break;
    default:
      break;
  }
  if (post == 1) {
    cpu.parallel_for(pre, std::max<int64_t>(1, elementwise_grain / std::max<int64_t>(red, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t p = b; p < e; ++p) {
                         const T* row = in + p * red;
                         T acc = init;
                         if (kind != reduce_kind::sum && kind != reduce_kind::mean) {
                           for (int64_t j = 0; j < red; ++j)
                             acc = combine(acc, row[j]);
                         } else {
                           // Pairwise-ish: 4 accumulators keep float sums accurate and fast.
                           T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                           int64_t j = 0;
                           for (; j + 4 <= red; j += 4) {
                             s0 += row[j];
                             s1 += row[j + 1];
                             s2 += row[j + 2];
                             s3 += row[j + 3];
                           }
                           for (; j < red; ++j)
                             s0 += row[j];
                           acc = T((s0 + s1) + (s2 + s3));
                         }
                         out[p] = acc;
                       }
                     });
    return;
  }
  cpu.parallel_for(pre, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      T* o = out + p * post;
      std::fill_n(o, post, init);
      for (int64_t j = 0; j < red; ++j) {
        const T* row = in + (p * red + j) * post;
        for (int64_t q = 0; q < post; ++q)
          o[q] = combine(o[q], row[q]);
      }
    }
  });
}

class reduce_kernel : public kernel {
public:
  reduce_kernel(const kernel_construction& c, reduce_kind kind)
      : kind_(kind), keep_dims_(c.attr<bool>("keep_dims")) {}

  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    int rank = x.rank();
    RUNNEL_ASSIGN_OR_RETURN(auto reduce, reduction_axes(ctx.input(1), rank));
    std::vector<int64_t> out_dims, kept_dims;
    int64_t count = 1;
    for (int d = 0; d < rank; ++d) {
      if (reduce[size_t(d)]) {
        count *= x.dim(d);
        if (keep_dims_)
          out_dims.push_back(1);
      } else {
        out_dims.push_back(x.dim(d));
      }
    }
    if ((kind_ == reduce_kind::max || kind_ == reduce_kind::min) && count == 0 &&
        x.num_elements() == 0 && !out_dims.empty())
      return invalid_argument("Max/Min over an empty dimension of shape " + x.shape().to_string());
    auto run = [&]<class T>() -> status {
      // Reduce one maximal run of adjacent reduced axes at a time, innermost first.
      tensor cur = x;
      std::vector<int64_t> dims = x.shape().dims();
      std::vector<bool> red = reduce;
      for (int d = int(dims.size()) - 1; d >= 0;) {
        if (!red[size_t(d)]) {
          --d;
          continue;
        }
        int hi = d;
        while (d >= 0 && red[size_t(d)])
          --d;
        int lo = d + 1;
        int64_t pre = 1, mid = 1, post = 1;
        for (int i = 0; i < lo; ++i)
          pre *= dims[size_t(i)];
        for (int i = lo; i <= hi; ++i)
          mid *= dims[size_t(i)];
        for (int i = hi + 1; i < int(dims.size()); ++i)
          post *= dims[size_t(i)];
        tensor next(x.type(), shape{pre * post});
        reduce_middle<T>(ctx.cpu(), cur.data<T>(), next.data<T>(), pre, mid, post, kind_);
        dims.erase(dims.begin() + lo, dims.begin() + hi + 1);
        red.erase(red.begin() + lo, red.begin() + hi + 1);
        cur = std::move(next);
      }
      if constexpr (!std::is_same_v<T, bool>)
        if (kind_ == reduce_kind::mean && count > 0) {
          T* p = cur.data<T>();
          for (int64_t i = 0; i < cur.num_elements(); ++i)
            p[i] = T(p[i] / T(count));
        }
      if (cur.shares_buffer_with(x))
        cur = cur.copy();
      RUNNEL_ASSIGN_OR_RETURN(tensor out, cur.reshaped(shape(out_dims)));
      ctx.set_output(0, std::move(out));
      return {};
    };
    if (x.type() == dtype::boolean)
      return run.template operator()<bool>();
    return dispatch_number(x.type(), run);
  }

private:
  reduce_kind kind_;
  bool keep_dims_;
};

class argmax_kernel : public kernel {
public:
  argmax_kernel(const kernel_construction& c, bool minimum)
      : out_type_(c.attr<dtype>("output_type")), min_(minimum) {}

  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    if (x.rank() == 0)
      return invalid_argument("ArgMax needs an input of rank at least 1");
    RUNNEL_ASSIGN_OR_RETURN(int64_t axis, read_axis(ctx.input(1), x.rank(), "dimension"));
    int64_t red = x.dim(int(axis));
    if (red == 0)
      return invalid_argument("ArgMax over an empty dimension of shape " + x.shape().to_string());
    int64_t pre = 1, post = 1;
    std::vector<int64_t> out_dims;
    for (int d = 0; d < x.rank(); ++d) {
      if (d < axis)
        pre *= x.dim(d);
      if (d > axis)
        post *= x.dim(d);
      if (d != axis)
        out_dims.push_back(x.dim(d));
    }
    tensor& out = ctx.allocate_output(0, out_type_, shape(out_dims));
    return dispatch_number(x.type(), [&]<class T>() -> status {
      const T* in = x.data<T>();
      for (int64_t p = 0; p < pre; ++p)
        for (int64_t q = 0; q < post; ++q) {
          int64_t best = 0;
          T best_v = in[p * red * post + q];
          for (int64_t j = 1; j < red; ++j) {
            T v = in[(p * red + j) * post + q];
            if (min_ ? v < best_v : v > best_v) {
              best_v = v;
              best = j;
            }
          }
          if (out_type_ == dtype::i64)
            out.data<int64_t>()[p * post + q] = best;
          else
            out.data<int32_t>()[p * post + q] = int32_t(best);
        }
      return {};
    });
  }

private:
  dtype out_type_;
  bool min_;
};

} // namespace

RUNNEL_KERNEL_FAMILY_PART(math, reduction) {
  const std::vector<dtype> numbers{dtype::f32, dtype::f64, dtype::i32, dtype::i64};
  const std::vector<std::pair<const char*, reduce_kind>> kinds{{"Sum", reduce_kind::sum},
                                                               {"Mean", reduce_kind::mean},
                                                               {"Max", reduce_kind::max},
                                                               {"Min", reduce_kind::min},
                                                               {"Prod", reduce_kind::prod}};
  for (const auto& entry : kinds) {
    reduce_kind kind = entry.second;
    reg.add(entry.first, device_type::cpu, numbers, [kind](const kernel_construction& c) {
      return result<std::unique_ptr<kernel>>(std::make_unique<reduce_kernel>(c, kind));
    });
  }
  for (auto [op, kind] : {std::pair{"All", reduce_kind::all}, std::pair{"Any", reduce_kind::any}})
    reg.add(op, device_type::cpu, {}, [kind = kind](const kernel_construction& c) {
      return result<std::unique_ptr<kernel>>(std::make_unique<reduce_kernel>(c, kind));
    });
  reg.add("ArgMax", device_type::cpu, numbers, [](const kernel_construction& c) {
    return result<std::unique_ptr<kernel>>(std::make_unique<argmax_kernel>(c, false));
  });
  reg.add("ArgMin", device_type::cpu, numbers, [](const kernel_construction& c) {
    return result<std::unique_ptr<kernel>>(std::make_unique<argmax_kernel>(c, true));
  });
}

} // namespace runnel
