// Reductions on the GPU (Sum, Mean, Max, Min) over any set of axes: one thread per output
// element walks the reduced elements through their strides, accumulating in float (double for
// double). The axes are read on the host (a host-memory input, as TensorFlow's HostMemory).
#include "runnel/ops/cuda/dispatch.hpp"
#include "runnel/ops/cuda/kernels.hpp"
#include "runnel/ops/core/math_functors.hpp"

namespace runnel {
namespace {

constexpr int max_rank = 8;

/// The kept dimensions (output order) and the reduced ones, with the input's strides.
struct reduce_plan {
  int kept = 0, reduced = 0;
  int64_t kept_dims[max_rank], kept_strides[max_rank];
  int64_t red_dims[max_rank], red_strides[max_rank];
  int64_t count = 1; ///< elements per output
};

template <class T>
__global__ void reduce_kernel(const T* x, T* out, int64_t outputs, reduce_plan p, gpu_reduce kind) {
  using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < outputs;
       o += int64_t(blockDim.x) * gridDim.x) {
    int64_t base = 0, rem = o;
    for (int d = p.kept - 1; d >= 0; --d) {
      base += (rem % p.kept_dims[d]) * p.kept_strides[d];
      rem /= p.kept_dims[d];
    }
    acc_t acc = kind == gpu_reduce::max   ? acc_t(-INFINITY)
                : kind == gpu_reduce::min ? acc_t(INFINITY)
                                          : acc_t(0);
    for (int64_t r = 0; r < p.count; ++r) {
      int64_t off = base, rr = r;
      for (int d = p.reduced - 1; d >= 0; --d) {
        off += (rr % p.red_dims[d]) * p.red_strides[d];
        rr /= p.red_dims[d];
      }
      acc_t v = acc_t(to_compute(x[off]));
      if (kind == gpu_reduce::max)
        acc = v > acc || v != v ? v : acc; // NaN propagates
      else if (kind == gpu_reduce::min)
        acc = v < acc || v != v ? v : acc;
      else
        acc += v;
    }
    if (kind == gpu_reduce::mean && p.count > 0)
      acc /= acc_t(p.count);
    out[o] = from_compute<T>(compute_t<T>(acc));
  }
}

template <class T>
cudaError_t launch_reduce(cudaStream_t s, const T* x, T* out, int64_t outputs,
                          const reduce_plan& p, gpu_reduce kind) {
  if (outputs == 0)
    return cudaSuccess;
  int blocks = int(std::min<int64_t>((outputs + 255) / 256, 65535));
  reduce_kernel<T><<<blocks, 256, 0, s>>>(x, out, outputs, p, kind);
  return cudaGetLastError();
}

} // namespace

status reduce_cuda(gpu_context& gpu, gpu_reduce kind, const tensor& x, const tensor& axes,
                   bool keep_dims, tensor* out, const std::string& node) {
  std::string where = "node '" + node + "'";
  if (x.memory() != memory_space::device)
    return invalid_argument(where + ": input 0 is in " + x.memory_name());
  if (!axes.host_readable())
    return invalid_argument(where + ": the reduction axes must be in host memory");
  if (x.rank() > max_rank)
    return unimplemented(where + ": GPU reductions support ranks up to 8");
  auto flags = reduction_axes(axes, x.rank());
  if (!flags.ok())
    return flags.error().with_context(where);
  reduce_plan p;
  std::vector<int64_t> out_dims;
  int64_t stride = 1;
  std::vector<int64_t> strides(size_t(x.rank()));
  for (int d = x.rank() - 1; d >= 0; --d) {
    strides[size_t(d)] = stride;
    stride *= x.dim(d);
  }
  for (int d = 0; d < x.rank(); ++d) {
    if ((*flags)[size_t(d)]) {
      p.red_dims[p.reduced] = x.dim(d);
      p.red_strides[p.reduced++] = strides[size_t(d)];
      p.count *= x.dim(d);
      if (keep_dims)
        out_dims.push_back(1);
    } else {
      p.kept_dims[p.kept] = x.dim(d);
      p.kept_strides[p.kept++] = strides[size_t(d)];
      out_dims.push_back(x.dim(d));
    }
  }
  if ((kind == gpu_reduce::max || kind == gpu_reduce::min) && p.count == 0 &&
      x.num_elements() == 0 && !out_dims.empty())
    return invalid_argument(where + ": Max/Min over an empty dimension of shape " +
                            x.shape().to_string());
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(x.type(), shape(out_dims), node));
  return dispatch_gpu_float(x.type(), where, [&]<class T>() {
    return cuda_status(
        launch_reduce<T>(gpu.compute(), x.data<T>(), out->data<T>(), out->num_elements(), p, kind),
        where);
  });
}

} // namespace runnel
