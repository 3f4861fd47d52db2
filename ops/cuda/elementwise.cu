// Element-wise kernels on the GPU. The arithmetic is ops/core/math_functors.hpp's, the same the CPU
// kernels run; 16-bit floats compute through float (widen_apply).
#include "runnel/ops/core/math_functors.hpp"
#include "runnel/ops/cuda/dispatch.hpp"
#include "runnel/ops/cuda/kernels.hpp"

namespace runnel {
namespace {

constexpr int max_rank = 8;
constexpr int block_threads = 256;

/// Per output dimension: its size and each input's stride (0 where it is broadcast).
struct broadcast_strides {
  int rank;
  int64_t dims[max_rank];
  int64_t stride_a[max_rank], stride_b[max_rank];
};

// ---- kernels ----

template <class Op, class T, class Out>
__global__ void binary_kernel(const T* a, const T* b, Out* out, int64_t n, broadcast_strides s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    int64_t rem = i, ia = 0, ib = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      int64_t c = rem % s.dims[d];
      rem /= s.dims[d];
      ia += c * s.stride_a[d];
      ib += c * s.stride_b[d];
    }
    out[i] = widen_apply<Op>(a[ia], b[ib]);
  }
}

template <class Op, class T> __global__ void unary_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    y[i] = widen_apply<Op>(x[i]);
}

/// _UnaryGrad: dx = Op::grad(x, y, dy), 16-bit floats through float.
template <class Op, class T>
__global__ void unary_grad_kernel(const T* x, const T* y, const T* dy, T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    dx[i] = from_compute<T>(Op::grad(to_compute(x[i]), to_compute(y[i]), to_compute(dy[i])));
}

template <class From, class To> __global__ void cast_kernel(const From* x, To* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    y[i] = from_compute<To>(compute_t<To>(to_compute(x[i])));
}

template <class T> __global__ void fill_kernel(T* y, T value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    y[i] = value;
}

/// out = cond ? t : e, cond per element (row = 1), per leading row, or one for all (row = n).
template <class T>
__global__ void select_kernel(const bool* cond, const T* t, const T* e, T* out, int64_t n,
                              int64_t row) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    out[i] = cond[i / row] ? t[i] : e[i];
}

/// Up to 8 addends per pass; out = sum (first pass) or out + sum (later passes).
struct addends {
  const void* x[8];
  int count;
  bool accumulate;
};
template <class T> __global__ void add_n_kernel(addends a, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    compute_t<T> acc = a.accumulate ? to_compute(out[i]) : compute_t<T>(0);
    for (int k = 0; k < a.count; ++k)
      acc += to_compute(static_cast<const T*>(a.x[k])[i]);
    out[i] = from_compute<T>(acc);
  }
}

// ---- launchers ----

int grid_for(int64_t n) {
  return int(std::min<int64_t>((n + block_threads - 1) / block_threads, 65535));
}

template <class Op, class T, class Out>
cudaError_t launch_binary(cudaStream_t stream, const T* a, const T* b, Out* out, int64_t n,
                          const broadcast_strides& s) {
  if (n == 0)
    return cudaSuccess;
  binary_kernel<Op, T, Out><<<grid_for(n), block_threads, 0, stream>>>(a, b, out, n, s);
  return cudaGetLastError();
}

template <class Op, class T>
cudaError_t launch_unary(cudaStream_t stream, const T* x, T* y, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  unary_kernel<Op, T><<<grid_for(n), block_threads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

// ---- entries ----

result<broadcast_strides> plan(const shape& a, const shape& b, const shape& out) {
  broadcast_strides s{};
  s.rank = std::max(out.rank(), 1);
  if (out.rank() > max_rank)
    return unimplemented("GPU broadcasting supports ranks up to 8, got " + out.to_string());
  if (out.rank() == 0) {
    s.dims[0] = 1;
    return s;
  }
  int64_t acc_a = 1, acc_b = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    int ia = a.rank() - out.rank() + d, ib = b.rank() - out.rank() + d;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    s.dims[d] = out[d];
    s.stride_a[d] = da == 1 ? 0 : acc_a;
    s.stride_b[d] = db == 1 ? 0 : acc_b;
    acc_a *= da;
    acc_b *= db;
  }
  return s;
}

status check_device(gpu_context& gpu, const tensor& t, const std::string& node, int i) {
  if (t.memory() != memory_space::device)
    return invalid_argument("node '" + node + "': input " + std::to_string(i) + " is in " +
                            t.memory_name() + ", not GPU:" + std::to_string(gpu.device()));
  return {};
}

template <class Row, class T>
status run_binary(gpu_context& gpu, const tensor& a, const tensor& b, tensor* out,
                  const std::string& node) {
  using Op = typename Row::functor;
  RUNNEL_ASSIGN_OR_RETURN(shape out_shape, broadcast_shapes(a.shape(), b.shape()));
  RUNNEL_ASSIGN_OR_RETURN(auto s, plan(a.shape(), b.shape(), out_shape));
  RUNNEL_ASSIGN_OR_RETURN(*out,
                          gpu.allocate(Row::boolean ? dtype::boolean : a.type(), out_shape, node));
  cudaError_t e;
  if constexpr (Row::boolean)
    e = launch_binary<Op, T, bool>(gpu.compute(), a.data<T>(), b.data<T>(), out->data<bool>(),
                                   out->num_elements(), s);
  else
    e = launch_binary<Op, T, T>(gpu.compute(), a.data<T>(), b.data<T>(), out->data<T>(),
                                out->num_elements(), s);
  return cuda_status(e, "node '" + node + "'");
}

template <class T>
status binary_typed(gpu_context& gpu, binary_op op, const tensor& a, const tensor& b, tensor* out,
                    const std::string& node) {
  return visit_binary(op, [&]<class Row>() -> status {
    constexpr bool floats_only = gpu_floats_only(Row::kind, Row::devices);
    if constexpr (Row::devices == binary_devices::cpu || Row::kind == binary_kind::logical)
      return unimplemented("node '" + node + "': " + binary_ops[size_t(op)].name +
                           " has no GPU kernel (ops/core/binary_ops.hpp)");
    else if constexpr (floats_only && std::is_integral_v<T>)
      return unimplemented("node '" + node + "': integer " + binary_ops[size_t(op)].name +
                           " has no GPU kernel (it must check for zero divisors): it runs on "
                           "the CPU");
    else
      return run_binary<Row, T>(gpu, a, b, out, node);
  });
}

template <class T>
status unary_grad_typed(gpu_context& gpu, unary_op op, const tensor& x, const tensor& y,
                        const tensor& dy, tensor* dx, const std::string& node) {
  RUNNEL_ASSIGN_OR_RETURN(*dx, gpu.allocate(x.type(), x.shape(), node));
  int64_t n = x.num_elements();
  return visit_unary(op, [&]<class Op>() -> status {
    if constexpr (has_unary_grad<Op>) {
      if (n == 0)
        return {};
      unary_grad_kernel<Op, T><<<grid_for(n), block_threads, 0, gpu.compute()>>>(
          x.data<T>(), y.data<T>(), dy.data<T>(), dx->data<T>(), n);
      return cuda_status(cudaGetLastError(), "node '" + node + "'");
    } else {
      return invalid_argument("node '" + node + "': " + unary_ops[size_t(op)].name +
                              " has no gradient functor");
    }
  });
}

template <class T>
status unary_typed(gpu_context& gpu, unary_op op, const tensor& x, tensor* out,
                   const std::string& node) {
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(x.type(), x.shape(), node));
  auto go = [&]<class Op>() {
    return cuda_status(
        launch_unary<Op, T>(gpu.compute(), x.data<T>(), out->data<T>(), x.num_elements()),
        "node '" + node + "'");
  };
  return visit_unary(op, go);
}

} // namespace

status binary_cuda(gpu_context& gpu, binary_op op, const tensor& a, const tensor& b, tensor* out,
                   const std::string& node) {
  RUNNEL_RETURN_IF_ERROR(check_device(gpu, a, node, 0));
  RUNNEL_RETURN_IF_ERROR(check_device(gpu, b, node, 1));
  if (a.type() != b.type())
    return invalid_argument("node '" + node + "': inputs are " + std::string(name(a.type())) +
                            " and " + std::string(name(b.type())));
  return dispatch_gpu_number(a.type(), "node '" + node + "'",
                             [&]<class T>() { return binary_typed<T>(gpu, op, a, b, out, node); });
}

status unary_cuda(gpu_context& gpu, unary_op op, const tensor& x, tensor* out,
                  const std::string& node) {
  RUNNEL_RETURN_IF_ERROR(check_device(gpu, x, node, 0));
  if (!is_floating(x.type()))
    return unimplemented("node '" + node + "': GPU unary kernels take floats, got " +
                         std::string(name(x.type())));
  return dispatch_gpu_number(x.type(), "node '" + node + "'", [&]<class T>() -> status {
    if constexpr (std::is_integral_v<T>)
      return internal_error("unreachable");
    else
      return unary_typed<T>(gpu, op, x, out, node);
  });
}

status unary_grad_cuda(gpu_context& gpu, unary_op op, const tensor& x, const tensor& y,
                       const tensor& dy, tensor* dx, const std::string& node) {
  for (int i = 0; i < 3; ++i)
    RUNNEL_RETURN_IF_ERROR(check_device(gpu, i == 0 ? x : i == 1 ? y : dy, node, i));
  if (!is_floating(x.type()) || y.type() != x.type() || dy.type() != x.type())
    return invalid_argument("node '" + node +
                            "': _UnaryGrad takes three tensors of one float "
                            "dtype");
  if (!(x.shape() == dy.shape()) || !(y.shape() == dy.shape()))
    return invalid_argument("node '" + node + "': x " + x.shape().to_string() + ", y " +
                            y.shape().to_string() + " and dy " + dy.shape().to_string() +
                            " must have one shape");
  return dispatch_gpu_number(x.type(), "node '" + node + "'", [&]<class T>() -> status {
    if constexpr (std::is_integral_v<T>)
      return internal_error("unreachable");
    else
      return unary_grad_typed<T>(gpu, op, x, y, dy, dx, node);
  });
}

status cast_cuda(gpu_context& gpu, const tensor& x, dtype to, tensor* out,
                 const std::string& node) {
  RUNNEL_RETURN_IF_ERROR(check_device(gpu, x, node, 0));
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(to, x.shape(), node));
  int64_t n = x.num_elements();
  auto from_any = [&](auto&& f) -> status { // sources include bool and bytes (accuracy casts)
    switch (x.type()) {
      case dtype::boolean:
        return f.template operator()<bool>();
      case dtype::u8:
        return f.template operator()<uint8_t>();
      case dtype::i8:
        return f.template operator()<int8_t>();
      default:
        return dispatch_gpu_number(x.type(), "node '" + node + "'", f);
    }
  };
  return from_any([&]<class From>() {
    return dispatch_gpu_number(to, "node '" + node + "'", [&]<class To>() {
      if (n > 0)
        cast_kernel<From, To>
            <<<grid_for(n), block_threads, 0, gpu.compute()>>>(x.data<From>(), out->data<To>(), n);
      return cuda_status(cudaGetLastError(), "node '" + node + "'");
    });
  });
}

status fill_cuda(gpu_context& gpu, dtype t, const shape& s, double value, tensor* out,
                 const std::string& node) {
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(t, s, node));
  int64_t n = out->num_elements();
  return dispatch_gpu_number(t, "node '" + node + "'", [&]<class T>() {
    if (n > 0)
      fill_kernel<T><<<grid_for(n), block_threads, 0, gpu.compute()>>>(
          out->data<T>(), from_compute<T>(compute_t<T>(value)), n);
    return cuda_status(cudaGetLastError(), "node '" + node + "'");
  });
}

status select_cuda(gpu_context& gpu, const tensor& cond, const tensor& t, const tensor& e,
                   tensor* out, const std::string& node) {
  std::string where = "node '" + node + "' (op Select)";
  RUNNEL_RETURN_IF_ERROR(check_device(gpu, cond, node, 0));
  RUNNEL_RETURN_IF_ERROR(check_device(gpu, t, node, 1));
  RUNNEL_RETURN_IF_ERROR(check_device(gpu, e, node, 2));
  if (!(t.shape() == e.shape()) || t.type() != e.type())
    return invalid_argument(where + ": t and e must have the same dtype and shape, got " +
                            t.shape().to_string() + " and " + e.shape().to_string());
  if (cond.type() != dtype::boolean)
    return invalid_argument(where + ": the condition must be bool");
  bool same = cond.shape() == t.shape(), scalar = cond.rank() == 0;
  bool rows = cond.rank() == 1 && t.rank() >= 1 && cond.dim(0) == t.dim(0);
  if (!same && !scalar && !rows)
    return invalid_argument(where + ": condition of shape " + cond.shape().to_string() +
                            " must match t's shape " + t.shape().to_string() +
                            ", be a scalar, or a vector over its first dimension");
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(t.type(), t.shape(), node));
  int64_t n = t.num_elements();
  int64_t row = same ? 1 : scalar ? std::max<int64_t>(n, 1) : (t.dim(0) ? n / t.dim(0) : 1);
  return dispatch_gpu_number(t.type(), where, [&]<class T>() {
    if (n > 0)
      select_kernel<T><<<grid_for(n), block_threads, 0, gpu.compute()>>>(
          cond.data<bool>(), t.data<T>(), e.data<T>(), out->data<T>(), n,
          std::max<int64_t>(row, 1));
    return cuda_status(cudaGetLastError(), where);
  });
}

status add_n_cuda(gpu_context& gpu, std::span<const tensor> xs, tensor* out,
                  const std::string& node) {
  std::string where = "node '" + node + "' (op AddN)";
  if (xs.empty())
    return invalid_argument(where + ": needs at least one input");
  for (size_t i = 0; i < xs.size(); ++i) {
    RUNNEL_RETURN_IF_ERROR(check_device(gpu, xs[i], node, int(i)));
    if (!(xs[i].shape() == xs[0].shape()) || xs[i].type() != xs[0].type())
      return invalid_argument(where + ": input " + std::to_string(i) + " is " +
                              std::string(name(xs[i].type())) + xs[i].shape().to_string() +
                              ", input 0 " + std::string(name(xs[0].type())) +
                              xs[0].shape().to_string());
  }
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(xs[0].type(), xs[0].shape(), node));
  int64_t n = out->num_elements();
  return dispatch_gpu_number(xs[0].type(), where, [&]<class T>() -> status {
    for (size_t start = 0; n > 0 && start < xs.size(); start += 8) {
      addends a{};
      a.count = int(std::min<size_t>(8, xs.size() - start));
      a.accumulate = start > 0;
      for (int k = 0; k < a.count; ++k)
        a.x[k] = xs[start + size_t(k)].raw_data();
      add_n_kernel<T><<<grid_for(n), block_threads, 0, gpu.compute()>>>(a, out->data<T>(), n);
      RUNNEL_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), where));
    }
    return status{};
  });
}

} // namespace runnel
