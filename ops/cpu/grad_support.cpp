// Kernels the gradient functions build on: BroadcastGradientArgs, ReducedShape, BiasAddGrad,
// Size, Rank, Slice, ExpandDims, UnsortedSegmentSum, StopGradient.
#include <algorithm>

#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {
namespace {

tensor int_vector_like(dtype t, const std::vector<int64_t>& v) {
  tensor out(t, shape{int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == dtype::i32)
      out.data<int32_t>()[i] = int32_t(v[i]);
    else
      out.data<int64_t>()[i] = v[i];
  }
  return out;
}

/// Which axes of each input a broadcast expanded: those must be summed in the gradient.
class broadcast_gradient_args_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto s0, to_int64_vector(ctx.input(0)));
    RUNNEL_ASSIGN_OR_RETURN(auto s1, to_int64_vector(ctx.input(1)));
    size_t rank = std::max(s0.size(), s1.size());
    std::vector<int64_t> r0, r1;
    for (size_t i = 0; i < rank; ++i) {
      int64_t d0 = i + s0.size() >= rank ? s0[i + s0.size() - rank] : 1;
      int64_t d1 = i + s1.size() >= rank ? s1[i + s1.size() - rank] : 1;
      if (d0 != d1 && d0 != 1 && d1 != 1)
        return invalid_argument("incompatible shapes " + shape(s0).to_string() + " and " +
                                shape(s1).to_string());
      if (d0 == 1 && d1 != 1)
        r0.push_back(int64_t(i));
      else if (d1 == 1 && d0 != 1)
        r1.push_back(int64_t(i));
      else if (d0 == 1 && d1 == 1) {
        r0.push_back(int64_t(i));
        r1.push_back(int64_t(i));
      }
    }
    ctx.set_output(0, int_vector_like(ctx.input(0).type(), r0));
    ctx.set_output(1, int_vector_like(ctx.input(0).type(), r1));
    return {};
  }
};

/// The input shape with the reduced axes set to 1 (the keep_dims shape of a reduction).
class reduced_shape_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto dims, to_int64_vector(ctx.input(0)));
    RUNNEL_ASSIGN_OR_RETURN(auto axes, to_int64_vector(ctx.input(1)));
    int64_t rank = int64_t(dims.size());
    for (auto a : axes) {
      if (a < -rank || a >= rank)
        return invalid_argument("axis " + std::to_string(a) + " out of range for rank " +
                                std::to_string(rank));
      dims[size_t(a < 0 ? a + rank : a)] = 1;
    }
    ctx.set_output(0, int_vector_like(dtype::i32, dims));
    return {};
  }
};

class bias_add_grad_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& g = ctx.input(0);
    if (g.rank() < 1)
      return invalid_argument("out_backprop must have rank at least 1");
    int64_t c = g.dim(g.rank() - 1), rows = c == 0 ? 0 : g.num_elements() / c;
    tensor& out = ctx.allocate_output(0, g.type(), shape{c});
    return dispatch_number(g.type(), [&]<class T>() -> status {
      T* o = out.data<T>();
      std::fill_n(o, c, T(0));
      const T* x = g.data<T>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < c; ++j)
          o[j] += x[r * c + j];
      return {};
    });
  }
};

class size_kernel : public kernel {
public:
  size_kernel(const kernel_construction& c, bool rank)
      : out_(c.attr<dtype>("out_type")), rank_(rank) {}
  status compute(kernel_context& ctx) override {
    int64_t v = rank_ ? ctx.input(0).rank() : ctx.input(0).num_elements();
    tensor& out = ctx.allocate_output(0, out_, shape{});
    if (out_ == dtype::i32)
      *out.data<int32_t>() = int32_t(v);
    else
      *out.data<int64_t>() = v;
    return {};
  }

private:
  dtype out_;
  bool rank_;
};

class slice_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto begin, to_int64_vector(ctx.input(1)));
    RUNNEL_ASSIGN_OR_RETURN(auto size, to_int64_vector(ctx.input(2)));
    int r = x.rank();
    if (int(begin.size()) != r || int(size.size()) != r)
      return invalid_argument("begin and size need " + std::to_string(r) +
                              " entries for an input of shape " + x.shape().to_string());
    std::vector<int64_t> out_dims(begin.size());
    for (int d = 0; d < r; ++d) {
      int64_t b = begin[size_t(d)], z = size[size_t(d)];
      if (z == -1)
        z = x.dim(d) - b;
      if (b < 0 || z < 0 || b + z > x.dim(d))
        return invalid_argument("slice begin " + shape(begin).to_string() + " size " +
                                shape(size).to_string() + " is out of range for " +
                                x.shape().to_string());
      out_dims[size_t(d)] = z;
    }
    tensor& out = ctx.allocate_output(0, x.type(), shape(out_dims));
    if (out.num_elements() == 0)
      return {};
    if (r == 0) {
      ctx.set_output(0, x);
      return {};
    }
    std::vector<int64_t> strides(size_t(r), 1);
    for (int d = r - 2; d >= 0; --d)
      strides[size_t(d)] = strides[size_t(d + 1)] * x.dim(d + 1);
    return dispatch(x.type(), [&]<class T>() -> status {
      const T* in = x.data<T>();
      T* o = out.data<T>();
      int64_t inner = out_dims[size_t(r - 1)];
      int64_t rows = out.num_elements() / inner;
      for (int64_t row = 0; row < rows; ++row) {
        int64_t off = begin[size_t(r - 1)], rem = row;
        for (int d = r - 2; d >= 0; --d) {
          int64_t i = rem % out_dims[size_t(d)];
          rem /= out_dims[size_t(d)];
          off += (begin[size_t(d)] + i) * strides[size_t(d)];
        }
        std::copy_n(in + off, inner, o + row * inner);
      }
      return {};
    });
  }
};

class expand_dims_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto dim, to_int64_vector(ctx.input(1)));
    if (dim.size() != 1)
      return invalid_argument("dim must be a scalar");
    int64_t d = dim[0], r = x.rank();
    if (d < -(r + 1) || d > r)
      return invalid_argument("dim " + std::to_string(d) + " is out of range for rank " +
                              std::to_string(r));
    if (d < 0)
      d += r + 1;
    std::vector<int64_t> dims = x.shape().dims();
    dims.insert(dims.begin() + d, 1);
    RUNNEL_ASSIGN_OR_RETURN(tensor out, x.reshaped(shape(dims)));
    ctx.set_output(0, std::move(out));
    return {};
  }
};

class unsorted_segment_sum_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    const tensor& data = ctx.input(0);
    const tensor& ids = ctx.input(1);
    RUNNEL_ASSIGN_OR_RETURN(auto nv, to_int64_vector(ctx.input(2)));
    int64_t n = nv.empty() ? 0 : nv[0];
    for (int d = 0; d < ids.rank(); ++d)
      if (d >= data.rank() || ids.dim(d) != data.dim(d))
        return invalid_argument("segment_ids of shape " + ids.shape().to_string() +
                                " must be a prefix of data's shape " + data.shape().to_string());
    std::vector<int64_t> dims{n};
    for (int d = ids.rank(); d < data.rank(); ++d)
      dims.push_back(data.dim(d));
    tensor& out = ctx.allocate_output(0, data.type(), shape(dims));
    int64_t k = ids.num_elements(),
            inner = k == 0 ? 0 : data.num_elements() / std::max<int64_t>(k, 1);
    if (k == 0)
      inner = out.num_elements() / std::max<int64_t>(n, 1);
    return dispatch_number(data.type(), [&]<class T>() -> status {
      T* o = out.data<T>();
      std::fill_n(o, out.num_elements(), T(0));
      const T* x = data.data<T>();
      for (int64_t i = 0; i < k; ++i) {
        int64_t id = ids.type() == dtype::i32 ? ids.data<int32_t>()[i] : ids.data<int64_t>()[i];
        if (id < 0)
          continue; // negative ids are dropped, as in TensorFlow
        if (id >= n)
          return invalid_argument("segment_ids[" + std::to_string(i) + "] = " + std::to_string(id) +
                                  " is not in [0, " + std::to_string(n) + ")");
        for (int64_t j = 0; j < inner; ++j)
          o[id * inner + j] += x[i * inner + j];
      }
      return {};
    });
  }
};

class pass_through_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    ctx.set_output(0, ctx.input(0));
    return {};
  }
};

} // namespace

RUNNEL_KERNEL_FAMILY(grad_support) {
  auto cpu = device_type::cpu;
  reg.add("StopGradient", cpu, {}, make_simple_kernel<pass_through_kernel>);
  reg.add("BroadcastGradientArgs", cpu, {}, make_simple_kernel<broadcast_gradient_args_kernel>);
  reg.add("ReducedShape", cpu, {}, make_simple_kernel<reduced_shape_kernel>);
  // Typed: their 16-bit forms come from ops/cpu/reduced_precision.cpp.
  const std::vector<dtype> numbers{dtype::f32, dtype::f64, dtype::i32, dtype::i64};
  reg.add("BiasAddGrad", cpu, numbers, make_simple_kernel<bias_add_grad_kernel>);
  reg.add("Size", cpu, {}, [](const kernel_construction& c) {
    return result<std::unique_ptr<kernel>>(std::make_unique<size_kernel>(c, false));
  });
  reg.add("Rank", cpu, {}, [](const kernel_construction& c) {
    return result<std::unique_ptr<kernel>>(std::make_unique<size_kernel>(c, true));
  });
  reg.add("Slice", cpu, {}, make_simple_kernel<slice_kernel>);
  reg.add("ExpandDims", cpu, {}, make_simple_kernel<expand_dims_kernel>);
  reg.add("UnsortedSegmentSum", cpu, numbers, make_simple_kernel<unsorted_segment_sum_kernel>);
}

} // namespace runnel
