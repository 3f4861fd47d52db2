// Element-wise kernels on the GPU. The arithmetic is ops/math_functors.hpp's, the same the CPU
// kernels run; 16-bit floats compute through float (widen_apply).
#include "runnel/ops/cuda/dispatch.hpp"
#include "runnel/ops/cuda/kernels.hpp"
#include "runnel/ops/math_functors.hpp"

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

template <class From, class To> __global__ void cast_kernel(const From* x, To* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    y[i] = from_compute<To>(compute_t<To>(to_compute(x[i])));
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

template <class Op, class T>
status run_binary(gpu_context& gpu, const tensor& a, const tensor& b, tensor* out,
                  const std::string& node, bool compare) {
  RUNNEL_ASSIGN_OR_RETURN(shape out_shape, broadcast_shapes(a.shape(), b.shape()));
  RUNNEL_ASSIGN_OR_RETURN(auto s, plan(a.shape(), b.shape(), out_shape));
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(compare ? dtype::boolean : a.type(), out_shape, node));
  cudaError_t e;
  if constexpr (std::is_same_v<Op, op_greater> || std::is_same_v<Op, op_less> ||
                std::is_same_v<Op, op_equal>)
    e = launch_binary<Op, T, bool>(gpu.compute(), a.data<T>(), b.data<T>(), out->data<bool>(),
                                   out->num_elements(), s);
  else
    e = launch_binary<Op, T, T>(gpu.compute(), a.data<T>(), b.data<T>(), out->data<T>(),
                                out->num_elements(), s);
  return cuda_status(e, "node '" + node + "'");
}

template <class T>
status binary_typed(gpu_context& gpu, gpu_binary op, const tensor& a, const tensor& b,
                    tensor* out, const std::string& node) {
  switch (op) {
    case gpu_binary::add:
      return run_binary<op_add, T>(gpu, a, b, out, node, false);
    case gpu_binary::sub:
      return run_binary<op_sub, T>(gpu, a, b, out, node, false);
    case gpu_binary::mul:
      return run_binary<op_mul, T>(gpu, a, b, out, node, false);
    case gpu_binary::div:
      if constexpr (std::is_integral_v<T>)
        return unimplemented("node '" + node + "': integer Div has no GPU kernel (it must "
                             "check for zero divisors): it runs on the CPU");
      else
        return run_binary<op_div, T>(gpu, a, b, out, node, false);
    case gpu_binary::maximum:
      return run_binary<op_maximum, T>(gpu, a, b, out, node, false);
    case gpu_binary::minimum:
      return run_binary<op_minimum, T>(gpu, a, b, out, node, false);
    case gpu_binary::squared_difference:
      return run_binary<op_squared_difference, T>(gpu, a, b, out, node, false);
    case gpu_binary::relu_grad:
      return run_binary<op_relu_grad, T>(gpu, a, b, out, node, false);
    case gpu_binary::sigmoid_grad:
      return run_binary<op_sigmoid_grad, T>(gpu, a, b, out, node, false);
    case gpu_binary::tanh_grad:
      return run_binary<op_tanh_grad, T>(gpu, a, b, out, node, false);
    case gpu_binary::greater:
      return run_binary<op_greater, T>(gpu, a, b, out, node, true);
    case gpu_binary::less:
      return run_binary<op_less, T>(gpu, a, b, out, node, true);
    case gpu_binary::equal:
      return run_binary<op_equal, T>(gpu, a, b, out, node, true);
  }
  return internal_error("unknown binary op");
}

template <class T>
status unary_typed(gpu_context& gpu, gpu_unary op, const tensor& x, tensor* out,
                   const std::string& node) {
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(x.type(), x.shape(), node));
  auto go = [&]<class Op>() {
    return cuda_status(launch_unary<Op, T>(gpu.compute(), x.data<T>(), out->data<T>(),
                                           x.num_elements()),
                       "node '" + node + "'");
  };
  switch (op) {
    case gpu_unary::neg:
      return go.template operator()<op_neg>();
    case gpu_unary::exp:
      return go.template operator()<op_exp>();
    case gpu_unary::log:
      return go.template operator()<op_log>();
    case gpu_unary::sqrt:
      return go.template operator()<op_sqrt>();
    case gpu_unary::square:
      return go.template operator()<op_square>();
    case gpu_unary::tanh:
      return go.template operator()<op_tanh>();
    case gpu_unary::sigmoid:
      return go.template operator()<op_sigmoid>();
    case gpu_unary::relu:
      return go.template operator()<op_relu>();
    case gpu_unary::abs:
      return go.template operator()<op_abs>();
    case gpu_unary::rsqrt:
      return go.template operator()<op_rsqrt>();
    case gpu_unary::reciprocal:
      return go.template operator()<op_reciprocal>();
  }
  return internal_error("unknown unary op");
}

} // namespace

status binary_cuda(gpu_context& gpu, gpu_binary op, const tensor& a, const tensor& b, tensor* out,
                   const std::string& node) {
  RUNNEL_RETURN_IF_ERROR(check_device(gpu, a, node, 0));
  RUNNEL_RETURN_IF_ERROR(check_device(gpu, b, node, 1));
  if (a.type() != b.type())
    return invalid_argument("node '" + node + "': inputs are " + std::string(name(a.type())) +
                            " and " + std::string(name(b.type())));
  return dispatch_gpu_number(a.type(), "node '" + node + "'", [&]<class T>() {
    return binary_typed<T>(gpu, op, a, b, out, node);
  });
}

status unary_cuda(gpu_context& gpu, gpu_unary op, const tensor& x, tensor* out,
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

status cast_cuda(gpu_context& gpu, const tensor& x, dtype to, tensor* out, const std::string& node) {
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
        cast_kernel<From, To><<<grid_for(n), block_threads, 0, gpu.compute()>>>(
            x.data<From>(), out->data<To>(), n);
      return cuda_status(cudaGetLastError(), "node '" + node + "'");
    });
  });
}

} // namespace runnel
