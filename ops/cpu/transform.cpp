// Kernels that rearrange arrays: Pack, Unpack, Split, Squeeze, Tile, Pad, ReverseV2, Range,
// StridedSlice and StridedSliceGrad.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/graph/strided_slice.hpp"

namespace runnel {
namespace {

std::vector<int64_t> row_major_strides(const dim_vector& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int d = int(dims.size()) - 2; d >= 0; --d)
    s[size_t(d)] = s[size_t(d + 1)] * dims[size_t(d + 1)];
  return s;
}

/// out[i] = in[source(i)] for every output element; `source` maps output coordinates.
template <class F> status gather_elements(const tensor& in, tensor& out, F source) {
  const dim_vector& od = out.shape().dims();
  int64_t n = out.num_elements();
  std::vector<int64_t> coord(od.size(), 0);
  return dispatch(in.type(), [&]<class T>() -> status {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t from = source(coord);
      dst[i] = from >= 0 ? src[from] : T{};
      for (int d = int(od.size()) - 1; d >= 0; --d) {
        if (++coord[size_t(d)] < od[size_t(d)])
          break;
        coord[size_t(d)] = 0;
      }
    }
    return {};
  });
}


class pack_kernel : public kernel {
public:
  explicit pack_kernel(const kernel_construction& c) : axis_(c.attr<int64_t>("axis")) {}
  status compute(kernel_context& ctx) override {
    const tensor& first = ctx.input(0);
    int r = first.rank();
    int64_t axis = axis_ < 0 ? axis_ + r + 1 : axis_;
    if (axis < 0 || axis > r)
      return invalid_argument("axis " + std::to_string(axis_) + " is out of range for rank " +
                              std::to_string(r + 1));
    int n = ctx.num_inputs();
    for (int i = 1; i < n; ++i)
      if (!(ctx.input(i).shape() == first.shape()) || ctx.input(i).type() != first.type())
        return invalid_argument("input " + std::to_string(i) + " has shape " +
                                ctx.input(i).shape().to_string() + " but input 0 has " +
                                first.shape().to_string());
    std::vector<int64_t> dims = first.shape().dims();
    dims.insert(dims.begin() + axis, n);
    tensor& out = ctx.allocate_output(0, first.type(), shape(dims));
    int64_t outer = 1;
    for (int d = 0; d < axis; ++d)
      outer *= first.dim(d);
    int64_t inner = outer ? first.num_elements() / std::max<int64_t>(outer, 1) : 0;
    return dispatch(first.type(), [&]<class T>() -> status {
      T* o = out.data<T>();
      for (int64_t a = 0; a < outer; ++a)
        for (int i = 0; i < n; ++i)
          std::copy_n(ctx.input(i).data<T>() + a * inner, inner, o + (a * n + i) * inner);
      return {};
    });
  }

private:
  int64_t axis_;
};

/// Splits `x` along `axis` into `n` equal parts, each keeping (or dropping) that axis.
status split_into(kernel_context& ctx, const tensor& x, int64_t axis, int64_t n, bool keep_axis) {
  int r = x.rank();
  if (axis < 0)
    axis += r;
  if (axis < 0 || axis >= r)
    return invalid_argument("axis out of range for shape " + x.shape().to_string());
  if (x.dim(int(axis)) % n != 0)
    return invalid_argument("dimension " + std::to_string(axis) + " of " + x.shape().to_string() +
                            " does not divide into " + std::to_string(n) + " parts");
  int64_t part = x.dim(int(axis)) / n, outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d)
    outer *= x.dim(d);
  for (int d = int(axis) + 1; d < r; ++d)
    inner *= x.dim(d);
  std::vector<int64_t> dims = x.shape().dims();
  if (keep_axis)
    dims[size_t(axis)] = part;
  else
    dims.erase(dims.begin() + axis);
  return dispatch(x.type(), [&]<class T>() -> status {
    for (int64_t i = 0; i < n; ++i) {
      tensor& o = ctx.allocate_output(int(i), x.type(), shape(dims));
      for (int64_t a = 0; a < outer; ++a)
        std::copy_n(x.data<T>() + (a * x.dim(int(axis)) + i * part) * inner, part * inner,
                    o.data<T>() + a * part * inner);
    }
    return {};
  });
}

class unpack_kernel : public kernel {
public:
  explicit unpack_kernel(const kernel_construction& c)
      : axis_(c.attr<int64_t>("axis")), num_(c.attr<int64_t>("num")) {}
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    int64_t axis = axis_ < 0 ? axis_ + x.rank() : axis_;
    if (axis < 0 || axis >= x.rank() || x.dim(int(axis)) != num_)
      return invalid_argument("cannot unpack " + x.shape().to_string() + " into " +
                              std::to_string(num_) + " along axis " + std::to_string(axis_));
    return split_into(ctx, x, axis, num_, false);
  }

private:
  int64_t axis_, num_;
};

class split_kernel : public kernel {
public:
  explicit split_kernel(const kernel_construction& c) : n_(c.attr<int64_t>("num_split")) {}
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(int64_t axis,
                            read_axis(ctx.input(0), ctx.input(1).rank(), "split_dim"));
    return split_into(ctx, ctx.input(1), axis, n_, true);
  }

private:
  int64_t n_;
};

class squeeze_kernel : public kernel {
public:
  explicit squeeze_kernel(const kernel_construction& c)
      : axes_(c.attr<std::vector<int64_t>>("squeeze_dims")) {}
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    std::vector<bool> drop(static_cast<size_t>(x.rank()), axes_.empty());
    for (auto a : axes_) {
      int64_t d = a < 0 ? a + x.rank() : a;
      if (d < 0 || d >= x.rank() || x.dim(int(d)) != 1)
        return invalid_argument("cannot squeeze dimension " + std::to_string(a) + " of " +
                                x.shape().to_string());
      drop[size_t(d)] = true;
    }
    std::vector<int64_t> dims;
    for (int d = 0; d < x.rank(); ++d)
      if (!(drop[size_t(d)] && x.dim(d) == 1))
        dims.push_back(x.dim(d));
    RUNNEL_ASSIGN_OR_RETURN(tensor out, x.reshaped(shape(dims)));
    ctx.set_output(0, std::move(out));
    return {};
  }

private:
  std::vector<int64_t> axes_;
};

class tile_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto m, to_int64_vector(ctx.input(1)));
    if (int(m.size()) != x.rank())
      return invalid_argument("multiples has " + std::to_string(m.size()) +
                              " entries for an input of shape " + x.shape().to_string());
    std::vector<int64_t> dims;
    for (int d = 0; d < x.rank(); ++d) {
      if (m[size_t(d)] < 0)
        return invalid_argument("multiples must be non-negative");
      dims.push_back(x.dim(d) * m[size_t(d)]);
    }
    tensor& out = ctx.allocate_output(0, x.type(), shape(dims));
    const dim_vector& in_dims = x.shape().dims();
    auto strides = row_major_strides(in_dims);
    return gather_elements(x, out, [&](const std::vector<int64_t>& c) {
      int64_t off = 0;
      for (size_t d = 0; d < c.size(); ++d)
        off += (c[d] % in_dims[d]) * strides[d];
      return off;
    });
  }
};

class pad_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    const tensor& p = ctx.input(1);
    if (p.rank() != 2 || p.dim(0) != x.rank() || p.dim(1) != 2)
      return invalid_argument("paddings must be [" + std::to_string(x.rank()) + ", 2], got " +
                              p.shape().to_string());
    RUNNEL_ASSIGN_OR_RETURN(auto flat, to_int64_vector(p.reshaped({p.num_elements()}).value()));
    std::vector<int64_t> dims, before;
    for (int d = 0; d < x.rank(); ++d) {
      int64_t b = flat[size_t(2 * d)], a = flat[size_t(2 * d + 1)];
      if (b < 0 || a < 0)
        return invalid_argument("paddings must be non-negative");
      before.push_back(b);
      dims.push_back(x.dim(d) + b + a);
    }
    tensor& out = ctx.allocate_output(0, x.type(), shape(dims));
    const dim_vector& in_dims = x.shape().dims();
    auto strides = row_major_strides(in_dims);
    return gather_elements(x, out, [&](const std::vector<int64_t>& c) -> int64_t {
      int64_t off = 0;
      for (size_t d = 0; d < c.size(); ++d) {
        int64_t i = c[d] - before[d];
        if (i < 0 || i >= in_dims[d])
          return -1; // padding: zero
        off += i * strides[d];
      }
      return off;
    });
  }
};

class reverse_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto axes, to_int64_vector(ctx.input(1)));
    std::vector<bool> flip(static_cast<size_t>(x.rank()), false);
    for (auto a : axes) {
      int64_t d = a < 0 ? a + x.rank() : a;
      if (d < 0 || d >= x.rank())
        return invalid_argument("axis " + std::to_string(a) + " is out of range for " +
                                x.shape().to_string());
      flip[size_t(d)] = true;
    }
    tensor& out = ctx.allocate_output(0, x.type(), x.shape());
    const dim_vector& dims = x.shape().dims();
    auto strides = row_major_strides(dims);
    return gather_elements(x, out, [&](const std::vector<int64_t>& c) {
      int64_t off = 0;
      for (size_t d = 0; d < c.size(); ++d)
        off += (flip[d] ? dims[d] - 1 - c[d] : c[d]) * strides[d];
      return off;
    });
  }
};

class reverse_sequence_kernel : public kernel {
public:
  explicit reverse_sequence_kernel(const kernel_construction& c)
      : seq_(c.attr<int64_t>("seq_dim")), batch_(c.attr<int64_t>("batch_dim")) {}
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto lengths, to_int64_vector(ctx.input(1)));
    int64_t seq = seq_, batch = batch_;
    if (seq < 0 || seq >= x.rank() || batch < 0 || batch >= x.rank() || seq == batch)
      return invalid_argument("seq_dim " + std::to_string(seq) + " and batch_dim " +
                              std::to_string(batch) + " must be two different dimensions of " +
                              x.shape().to_string());
    if (ctx.input(1).rank() != 1 || int64_t(lengths.size()) != x.dim(int(batch)))
      return invalid_argument("seq_lengths has shape " + ctx.input(1).shape().to_string() +
                              "; it needs one length per batch element (" +
                              std::to_string(x.dim(int(batch))) + ")");
    for (size_t b = 0; b < lengths.size(); ++b)
      if (lengths[b] < 0 || lengths[b] > x.dim(int(seq)))
        return invalid_argument("seq_lengths[" + std::to_string(b) +
                                "] = " + std::to_string(lengths[b]) + " is outside [0, " +
                                std::to_string(x.dim(int(seq))) + "]");
    tensor& out = ctx.allocate_output(0, x.type(), x.shape());
    const dim_vector& dims = x.shape().dims();
    auto strides = row_major_strides(dims);
    return gather_elements(x, out, [&](const std::vector<int64_t>& c) {
      int64_t off = 0, len = lengths[size_t(c[size_t(batch)])];
      for (size_t d = 0; d < c.size(); ++d)
        off += (int64_t(d) == seq && c[d] < len ? len - 1 - c[d] : c[d]) * strides[d];
      return off;
    });
  }

private:
  int64_t seq_, batch_;
};

class range_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& s = ctx.input(0);
    return dispatch_number(s.type(), [&]<class T>() -> status {
      T start = *ctx.input(0).data<T>(), limit = *ctx.input(1).data<T>(),
        delta = *ctx.input(2).data<T>();
      if (delta == T(0))
        return invalid_argument("delta must not be zero");
      if ((delta > 0 && start > limit) || (delta < 0 && start < limit))
        return invalid_argument("start " + std::to_string(double(start)) + " cannot reach limit " +
                                std::to_string(double(limit)) + " with delta " +
                                std::to_string(double(delta)));
      int64_t n = int64_t(std::ceil(std::abs(double(limit - start) / double(delta))));
      tensor& out = ctx.allocate_output(0, s.type(), shape{n});
      for (int64_t i = 0; i < n; ++i)
        out.data<T>()[i] = T(start + T(i) * delta);
      return {};
    });
  }
};



strided_slice_masks slice_masks_of(const kernel_construction& c) {
  return {c.attr<int64_t>("begin_mask"), c.attr<int64_t>("end_mask"),
          c.attr<int64_t>("ellipsis_mask"), c.attr<int64_t>("new_axis_mask"),
          c.attr<int64_t>("shrink_axis_mask")};
}

/// Calls fn(input offset, output index) for every element the plan selects.
template <class F> void for_each_selected(const shape& in, const strided_slice_plan& p, F fn) {
  int r = in.rank();
  auto strides = row_major_strides(in.dims());
  int64_t total = 1;
  for (auto c : p.count)
    total *= c;
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t off = 0;
    for (int d = 0; d < r; ++d)
      off += (p.start[size_t(d)] + idx[size_t(d)] * p.stride[size_t(d)]) * strides[size_t(d)];
    fn(off, o);
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < p.count[size_t(d)])
        break;
      idx[size_t(d)] = 0;
    }
  }
}

class strided_slice_kernel : public kernel {
public:
  explicit strided_slice_kernel(const kernel_construction& c) : masks_(slice_masks_of(c)) {}
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto b, to_int64_vector(ctx.input(1)));
    RUNNEL_ASSIGN_OR_RETURN(auto e, to_int64_vector(ctx.input(2)));
    RUNNEL_ASSIGN_OR_RETURN(auto s, to_int64_vector(ctx.input(3)));
    RUNNEL_ASSIGN_OR_RETURN(auto plan, plan_strided_slice(x.shape(), b, e, s, masks_));
    tensor& out = ctx.allocate_output(0, x.type(), shape(plan.output_dims));
    return dispatch(x.type(), [&]<class T>() -> status {
      const T* src = x.data<T>();
      T* dst = out.data<T>();
      for_each_selected(x.shape(), plan, [&](int64_t off, int64_t o) { dst[o] = src[off]; });
      return {};
    });
  }

private:
  strided_slice_masks masks_;
};

class strided_slice_grad_kernel : public kernel {
public:
  explicit strided_slice_grad_kernel(const kernel_construction& c) : masks_(slice_masks_of(c)) {}
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto dims, to_int64_vector(ctx.input(0)));
    RUNNEL_ASSIGN_OR_RETURN(auto b, to_int64_vector(ctx.input(1)));
    RUNNEL_ASSIGN_OR_RETURN(auto e, to_int64_vector(ctx.input(2)));
    RUNNEL_ASSIGN_OR_RETURN(auto s, to_int64_vector(ctx.input(3)));
    const tensor& dy = ctx.input(4);
    shape in(dims);
    RUNNEL_ASSIGN_OR_RETURN(auto plan, plan_strided_slice(in, b, e, s, masks_));
    if (!(shape(plan.output_dims) == dy.shape()))
      return invalid_argument("dy has shape " + dy.shape().to_string() + ", expected " +
                              shape(plan.output_dims).to_string());
    tensor& dx = ctx.allocate_output(0, dy.type(), in);
    return dispatch_number(dy.type(), [&]<class T>() -> status {
      std::fill_n(dx.data<T>(), dx.num_elements(), T(0));
      const T* g = dy.data<T>();
      T* out = dx.data<T>();
      for_each_selected(in, plan, [&](int64_t off, int64_t o) { out[off] += g[o]; });
      return {};
    });
  }

private:
  strided_slice_masks masks_;
};

} // namespace

RUNNEL_KERNEL_FAMILY(transform) {
  auto cpu = device_type::cpu;
  reg.add("StridedSlice", device_type::cpu, {}, make_kernel<strided_slice_kernel>);
  reg.add("StridedSliceGrad", device_type::cpu, {dtype::f32, dtype::f64, dtype::i32, dtype::i64},
          make_kernel<strided_slice_grad_kernel>);
  reg.add("Pack", cpu, {}, make_kernel<pack_kernel>);
  reg.add("Unpack", cpu, {}, make_kernel<unpack_kernel>);
  reg.add("Split", cpu, {}, make_kernel<split_kernel>);
  reg.add("Squeeze", cpu, {}, make_kernel<squeeze_kernel>);
  reg.add("Tile", cpu, {}, make_simple_kernel<tile_kernel>);
  reg.add("Pad", cpu, {}, make_simple_kernel<pad_kernel>);
  reg.add("ReverseV2", cpu, {}, make_simple_kernel<reverse_kernel>);
  reg.add("ReverseSequence", cpu, {}, make_kernel<reverse_sequence_kernel>);
  reg.add("Range", cpu, {}, make_simple_kernel<range_kernel>, "Tidx");
}

} // namespace runnel
