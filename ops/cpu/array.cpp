// Array kernels: Const, Placeholder, Identity, Shape, Reshape, Transpose, ConcatV2, Fill,
// GatherV2, OneHot, NoOp, Print.
#include <algorithm>
#include <iostream>
#include <mutex>

#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {

status identity_kernel::compute(kernel_context& ctx) {
  ctx.set_output(0, ctx.input(0));
  return {};
}

namespace {

class identity_n_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    for (int i = 0; i < ctx.num_inputs(); ++i)
      ctx.set_output(i, ctx.input(i));
    return {};
  }
};

} // namespace

std::vector<int64_t> flatten_indices(const tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.type() == dtype::i32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
  return v;
}

void copy_elements(dtype t, const void* src, void* dst, int64_t n) {
  if (t == dtype::string) {
    auto* s = static_cast<const std::string*>(src);
    auto* d = static_cast<std::string*>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = s[i];
  } else if (n > 0) {
    std::memcpy(dst, src, size_t(n) * size_of(t));
  }
}

namespace {

class const_kernel : public kernel {
public:
  explicit const_kernel(const kernel_construction& c) : value_(c.attr<tensor>("value")) {}
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    ctx.set_output(0, value_);
    return {};
  }

private:
  tensor value_;
};

class placeholder_kernel : public kernel {
public:
  explicit placeholder_kernel(const kernel_construction& c) : name_(c.node.name) {}
  status compute(kernel_context&) override {
    return invalid_argument("you must feed a value for placeholder '" + name_ + "'");
  }

private:
  std::string name_;
};

class no_op_kernel : public kernel {
public:
  bool reentrant() const override { return true; }
  status compute(kernel_context&) override { return {}; }
};

class shape_kernel : public kernel {
public:
  explicit shape_kernel(const kernel_construction& c) : out_(c.attr<dtype>("out_type")) {}
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    auto& s = ctx.input(0).shape();
    tensor& out = ctx.allocate_output(0, out_, shape{s.rank()});
    for (int i = 0; i < s.rank(); ++i) {
      if (out_ == dtype::i32)
        out.data<int32_t>()[i] = int32_t(s[i]);
      else
        out.data<int64_t>()[i] = s[i];
    }
    return {};
  }

private:
  dtype out_;
};

class reshape_kernel : public kernel {
public:
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto dims, to_int64_vector(ctx.input(1)));
    if (ctx.input(1).rank() != 1)
      return invalid_argument("shape must be a vector, got shape " +
                              ctx.input(1).shape().to_string());
    int infer = -1;
    int64_t known = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == -1) {
        if (infer >= 0)
          return invalid_argument("only one dimension of the new shape may be -1");
        infer = int(i);
      } else if (dims[i] < 0) {
        return invalid_argument("new shape has a negative dimension " + std::to_string(dims[i]));
      } else {
        known *= dims[i];
      }
    }
    if (infer >= 0) {
      if (known == 0 || x.num_elements() % known != 0)
        return invalid_argument("cannot reshape a tensor of shape " + x.shape().to_string() +
                                " to " + shape(dims).to_string());
      dims[size_t(infer)] = x.num_elements() / known;
    }
    RUNNEL_ASSIGN_OR_RETURN(tensor out, x.reshaped(shape(dims)));
    ctx.set_output(0, std::move(out));
    return {};
  }
};

class transpose_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto perm, to_int64_vector(ctx.input(1)));
    int r = x.rank();
    if (int(perm.size()) != r)
      return invalid_argument("perm " + shape(perm).to_string() + " does not match rank " +
                              std::to_string(r) + " of x " + x.shape().to_string());
    std::vector<bool> used(size_t(r), false);
    std::vector<int64_t> out_dims(static_cast<size_t>(r));
    for (int d = 0; d < r; ++d) {
      if (perm[size_t(d)] < 0 || perm[size_t(d)] >= r || used[size_t(perm[size_t(d)])])
        return invalid_argument("perm " + shape(perm).to_string() + " is not a permutation");
      used[size_t(perm[size_t(d)])] = true;
      out_dims[size_t(d)] = x.dim(int(perm[size_t(d)]));
    }
    tensor& y = ctx.allocate_output(0, x.type(), shape(out_dims));
    std::vector<int64_t> in_strides(size_t(r), 1);
    for (int d = r - 2; d >= 0; --d)
      in_strides[size_t(d)] = in_strides[size_t(d + 1)] * x.dim(d + 1);
    std::vector<int64_t> src_stride(static_cast<size_t>(r));
    for (int d = 0; d < r; ++d)
      src_stride[size_t(d)] = in_strides[size_t(perm[size_t(d)])];
    int64_t n = x.num_elements();
    if (n == 0)
      return {};
    return dispatch(x.type(), [&]<class T>() -> status {
      const T* in = x.data<T>();
      T* out = y.data<T>();
      if (r == 0) {
        out[0] = in[0];
        return {};
      }
      int64_t inner = out_dims[size_t(r - 1)], inner_stride = src_stride[size_t(r - 1)];
      int64_t rows = n / inner;
      for (int64_t row = 0; row < rows; ++row) {
        int64_t off = 0, rem = row;
        for (int d = r - 2; d >= 0; --d) {
          int64_t i = rem % out_dims[size_t(d)];
          rem /= out_dims[size_t(d)];
          off += i * src_stride[size_t(d)];
        }
        T* o = out + row * inner;
        for (int64_t j = 0; j < inner; ++j)
          o[j] = in[off + j * inner_stride];
      }
      return {};
    });
  }
};

class concat_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    int n = ctx.num_inputs() - 1;
    const tensor& first = ctx.input(0);
    int r = first.rank();
    if (r == 0)
      return invalid_argument("cannot concatenate scalars");
    RUNNEL_ASSIGN_OR_RETURN(int64_t axis, read_axis(ctx.input(n), r, "concat axis"));
    std::vector<int64_t> dims = first.shape().dims();
    dims[size_t(axis)] = 0;
    for (int i = 0; i < n; ++i) {
      auto& s = ctx.input(i).shape();
      if (s.rank() != r)
        return invalid_argument("input " + std::to_string(i) + " has shape " + s.to_string() +
                                " but input 0 has " + first.shape().to_string() +
                                " (ranks differ)");
      for (int d = 0; d < r; ++d)
        if (d != axis && s[d] != first.dim(d))
          return invalid_argument("input " + std::to_string(i) + " has shape " + s.to_string() +
                                  ", which differs from input 0's " + first.shape().to_string() +
                                  " in dimension " + std::to_string(d));
      dims[size_t(axis)] += s[int(axis)];
    }
    tensor& out = ctx.allocate_output(0, first.type(), shape(dims));
    int64_t outer = 1;
    for (int d = 0; d < axis; ++d)
      outer *= dims[size_t(d)];
    int64_t out_row = outer == 0 ? 0 : out.num_elements() / std::max<int64_t>(outer, 1);
    size_t es = size_of(first.type());
    char* dst = static_cast<char*>(out.raw_data());
    int64_t col = 0;
    for (int i = 0; i < n; ++i) {
      const tensor& in = ctx.input(i);
      int64_t in_row = outer == 0 ? 0 : in.num_elements() / std::max<int64_t>(outer, 1);
      const char* src = static_cast<const char*>(in.raw_data());
      for (int64_t o = 0; o < outer; ++o)
        copy_elements(first.type(), src + size_t(o * in_row) * es,
                      dst + size_t(o * out_row + col) * es, in_row);
      col += in_row;
    }
    return {};
  }
};

class fill_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto dims, to_int64_vector(ctx.input(0)));
    for (auto d : dims)
      if (d < 0)
        return invalid_argument("dims holds a negative dimension " + std::to_string(d));
    const tensor& v = ctx.input(1);
    if (v.rank() != 0)
      return invalid_argument("value must be a scalar, got shape " + v.shape().to_string());
    tensor& out = ctx.allocate_output(0, v.type(), shape(dims));
    return dispatch(v.type(), [&]<class T>() -> status {
      std::fill_n(out.data<T>(), out.num_elements(), *v.data<T>());
      return {};
    });
  }
};

class gather_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& params = ctx.input(0);
    const tensor& indices = ctx.input(1);
    if (params.rank() < 1)
      return invalid_argument("params must have rank at least 1");
    RUNNEL_ASSIGN_OR_RETURN(int64_t axis, read_axis(ctx.input(2), params.rank(), "axis"));
    RUNNEL_ASSIGN_OR_RETURN(auto idx, indices.rank() <= 1
                                          ? to_int64_vector(indices)
                                          : result<std::vector<int64_t>>(flatten_indices(indices)));
    int64_t limit = params.dim(int(axis));
    for (size_t i = 0; i < idx.size(); ++i)
      if (idx[i] < 0 || idx[i] >= limit)
        return invalid_argument("indices[" + std::to_string(i) + "] = " + std::to_string(idx[i]) +
                                " is not in [0, " + std::to_string(limit) + ")");
    std::vector<int64_t> dims(params.shape().dims().begin(), params.shape().dims().begin() + axis);
    dims.insert(dims.end(), indices.shape().dims().begin(), indices.shape().dims().end());
    dims.insert(dims.end(), params.shape().dims().begin() + axis + 1, params.shape().dims().end());
    tensor& out = ctx.allocate_output(0, params.type(), shape(dims));
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d)
      outer *= params.dim(d);
    for (int d = int(axis) + 1; d < params.rank(); ++d)
      inner *= params.dim(d);
    size_t es = size_of(params.type());
    auto* src = static_cast<const char*>(params.raw_data());
    auto* dst = static_cast<char*>(out.raw_data());
    int64_t k = int64_t(idx.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < k; ++i) {
        if (i + prefetch_rows < k)
          prefetch_bytes(src + size_t((o * limit + idx[size_t(i + prefetch_rows)]) * inner) * es,
                         size_t(inner) * es);
        copy_elements(params.type(), src + size_t((o * limit + idx[size_t(i)]) * inner) * es,
                      dst + size_t((o * k + i) * inner) * es, inner);
      }
    return {};
  }
};

class one_hot_kernel : public kernel {
public:
  explicit one_hot_kernel(const kernel_construction& c) : axis_(c.attr<int64_t>("axis")) {}
  status compute(kernel_context& ctx) override {
    const tensor& indices = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto depth_v, to_int64_vector(ctx.input(1)));
    int64_t depth = depth_v.empty() ? 0 : depth_v[0];
    if (depth < 0)
      return invalid_argument("depth must be non-negative, got " + std::to_string(depth));
    const tensor& on = ctx.input(2);
    const tensor& off = ctx.input(3);
    int r = indices.rank();
    int64_t axis = axis_ == -1 ? r : axis_;
    std::vector<int64_t> dims = indices.shape().dims();
    dims.insert(dims.begin() + axis, depth);
    tensor& out = ctx.allocate_output(0, on.type(), shape(dims));
    int64_t pre = 1, post = 1;
    for (int d = 0; d < r; ++d)
      (d < axis ? pre : post) *= indices.dim(d);
    return dispatch(on.type(), [&]<class T>() -> status {
      T on_v = *on.data<T>(), off_v = *off.data<T>();
      T* o = out.data<T>();
      std::fill_n(o, out.num_elements(), off_v);
      for (int64_t p = 0; p < pre; ++p)
        for (int64_t q = 0; q < post; ++q) {
          int64_t i = p * post + q;
          int64_t v = indices.type() == dtype::i64   ? indices.data<int64_t>()[i]
                      : indices.type() == dtype::i32 ? indices.data<int32_t>()[i]
                                                     : indices.data<uint8_t>()[i];
          if (v >= 0 && v < depth) // out-of-range indices give an all-off row, as in TF
            o[(p * depth + v) * post + q] = on_v;
        }
      return {};
    });
  }

private:
  int64_t axis_;
};

class print_kernel : public kernel {
public:
  explicit print_kernel(const kernel_construction& c)
      : message_(c.attr<std::string>("message")), first_n_(c.attr<int64_t>("first_n")),
        summarize_(c.attr<int64_t>("summarize")) {}
  status compute(kernel_context& ctx) override {
    ctx.set_output(0, ctx.input(0));
    if (first_n_ >= 0 && count_ >= first_n_)
      return {};
    ++count_;
    static std::mutex mu;
    std::lock_guard lock(mu);
    std::cerr << message_ << ctx.input(0).values_to_string(std::max<int64_t>(summarize_, 1) * 2)
              << std::endl;
    return {};
  }

private:
  std::string message_;
  int64_t first_n_, summarize_;
  int64_t count_ = 0;
};

class assert_kernel : public kernel {
public:
  explicit assert_kernel(const kernel_construction& c)
      : summarize_(std::max<int64_t>(c.attr<int64_t>("summarize"), 1)) {}
  status compute(kernel_context& ctx) override {
    const tensor& cond = ctx.input(0);
    if (cond.num_elements() != 1 || cond.type() != dtype::boolean)
      return invalid_argument("Assert: the condition must be one bool, got " +
                              std::string(name(cond.type())) + " " + cond.shape().to_string());
    if (*cond.data<bool>())
      return {};
    std::string message;
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      const tensor& t = ctx.input(i);
      if (!message.empty())
        message += ' ';
      if (t.type() == dtype::string && t.num_elements() == 1)
        message += t.data<std::string>()[0];
      else
        message += t.values_to_string(summarize_);
    }
    return invalid_argument(message.empty() ? std::string("assertion failed") : message);
  }

private:
  int64_t summarize_;
};

} // namespace

RUNNEL_KERNEL_FAMILY(array) {
  reg.add("Const", device_type::cpu, {}, make_kernel<const_kernel>);
  reg.add("Placeholder", device_type::cpu, {}, make_kernel<placeholder_kernel>);
  reg.add("Identity", device_type::cpu, {}, make_simple_kernel<identity_kernel>);
  reg.add("PlaceholderWithDefault", device_type::cpu, {}, make_simple_kernel<identity_kernel>);
  reg.add("IdentityN", device_type::cpu, {}, make_simple_kernel<identity_n_kernel>);
  reg.add("NoOp", device_type::cpu, {}, make_simple_kernel<no_op_kernel>);
  reg.add("Shape", device_type::cpu, {}, make_kernel<shape_kernel>);
  reg.add("Reshape", device_type::cpu, {}, make_simple_kernel<reshape_kernel>);
  reg.add("Transpose", device_type::cpu, {}, make_simple_kernel<transpose_kernel>);
  reg.add("ConcatV2", device_type::cpu, {}, make_simple_kernel<concat_kernel>);
  reg.add("Fill", device_type::cpu, {}, make_simple_kernel<fill_kernel>);
  reg.add("GatherV2", device_type::cpu, {}, make_simple_kernel<gather_kernel>);
  reg.add("OneHot", device_type::cpu, {}, make_kernel<one_hot_kernel>);
  reg.add("Print", device_type::cpu, {}, make_kernel<print_kernel>);
  reg.add("Assert", device_type::cpu, {}, make_kernel<assert_kernel>);
}

} // namespace runnel
