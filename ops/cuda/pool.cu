// Pooling on the GPU, NHWC, our own kernels: MaxPool, AvgPool and their gradients. Windows are
// clipped to the input (TensorFlow's SAME padding never wins a max and is not counted in an
// average), so asymmetric padding needs no copy. The gradients gather: a thread per input
// element sums the windows that hold it, in window order, so they are deterministic and add in
// the CPU kernels' order (no atomics). 16-bit floats compute through float.
#include "runnel/ops/cuda/dispatch.hpp"
#include "runnel/ops/cuda/kernels.hpp"
#include "runnel/ops/core/math_functors.hpp"
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

/// The geometry of one pooling: input [n, h, w, c], output [n, oh, ow, c], windows kh x kw at
/// strides sh x sw, starting pt rows above and pl columns left of the input.
/// Index arithmetic in I: int32_t when every flat index fits (the kernels are dominated by
/// their divisions, which 64-bit integers make several times slower), else int64_t.
template <class I> struct pool_geom {
  I n, h, w, c, oh, ow, kh, kw, sh, sw, pt, pl;
  template <class J> pool_geom<J> as() const {
    return {J(n), J(h), J(w), J(c), J(oh), J(ow), J(kh), J(kw), J(sh), J(sw), J(pt), J(pl)};
  }
};
using pool_geometry = pool_geom<int64_t>;

template <class I> __device__ inline I ceil_div_floor0(I a, I b) { // max(0, ceil(a / b)), b > 0
  return a <= 0 ? 0 : (a + b - 1) / b;
}

/// The first largest element of output window (b, oy, ox) in channel ch: its flat input index.
template <class T, class I>
__device__ I window_argmax(const T* x, const pool_geom<I>& g, I b, I oy, I ox, I ch) {
  I y0 = oy * g.sh - g.pt, x0 = ox * g.sw - g.pl;
  I best = -1;
  float best_v = -INFINITY;
  for (I yy = max(y0, I(0)); yy < min(y0 + g.kh, g.h); ++yy)
    for (I xx = max(x0, I(0)); xx < min(x0 + g.kw, g.w); ++xx) {
      I idx = ((b * g.h + yy) * g.w + xx) * g.c + ch;
      float v = float(to_compute(x[idx]));
      if (best < 0 || v > best_v) {
        best = idx;
        best_v = v;
      }
    }
  return best;
}

// ---- kernels ----

/// Max (Max = true) or average pooling, a thread per output element.
template <class T, bool Max, class I>
__global__ void pool_kernel(const T* x, T* y, pool_geom<I> g) {
  I total = g.n * g.oh * g.ow * g.c;
  for (I idx = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); idx < total;
       idx += I(blockDim.x) * I(gridDim.x)) {
    I ch = idx % g.c, ox = (idx / g.c) % g.ow, oy = (idx / (g.c * g.ow)) % g.oh,
            b = idx / (g.c * g.ow * g.oh);
    I y0 = oy * g.sh - g.pt, x0 = ox * g.sw - g.pl;
    float acc = Max ? -INFINITY : 0.f;
    I count = 0;
    for (I yy = max(y0, I(0)); yy < min(y0 + g.kh, g.h); ++yy)
      for (I xx = max(x0, I(0)); xx < min(x0 + g.kw, g.w); ++xx) {
        float v = float(to_compute(x[((b * g.h + yy) * g.w + xx) * g.c + ch]));
        if constexpr (Max)
          acc = v > acc || v != v ? v : acc;
        else
          acc += v;
        ++count;
      }
    if constexpr (!Max)
      acc = count ? acc / float(count) : 0.f;
    y[idx] = from_compute<T>(compute_t<T>(acc));
  }
}

/// The gradient of max (Max = true) or average pooling, a thread per input element: the sum of
/// dy over the windows holding it (max: those whose first largest element it is; average: each
/// window's share, dy / its element count).
template <class T, bool Max, class I>
__global__ void pool_grad_kernel(const T* x, const T* dy, T* dx, pool_geom<I> g) {
  I total = g.n * g.h * g.w * g.c;
  for (I idx = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); idx < total;
       idx += I(blockDim.x) * I(gridDim.x)) {
    I ch = idx % g.c, xx = (idx / g.c) % g.w, yy = (idx / (g.c * g.w)) % g.h,
            b = idx / (g.c * g.w * g.h);
    // Windows oy with oy*sh - pt <= yy < oy*sh - pt + kh, likewise for columns.
    I oy0 = ceil_div_floor0(yy + g.pt - g.kh + 1, g.sh), oy1 = min((yy + g.pt) / g.sh, g.oh - 1);
    I ox0 = ceil_div_floor0(xx + g.pl - g.kw + 1, g.sw), ox1 = min((xx + g.pl) / g.sw, g.ow - 1);
    float acc = 0;
    for (I oy = oy0; oy <= oy1; ++oy)
      for (I ox = ox0; ox <= ox1; ++ox) {
        I o = ((b * g.oh + oy) * g.ow + ox) * g.c + ch;
        if constexpr (Max) {
          if (window_argmax(x, g, b, oy, ox, ch) == idx)
            acc += float(to_compute(dy[o]));
        } else {
          I y0 = oy * g.sh - g.pt, x0 = ox * g.sw - g.pl;
          I rows = min(y0 + g.kh, g.h) - max(y0, I(0));
          I cols = min(x0 + g.kw, g.w) - max(x0, I(0));
          acc += float(to_compute(dy[o])) / float(rows * cols);
        }
      }
    dx[idx] = from_compute<T>(compute_t<T>(acc));
  }
}

// ---- launchers ----

int blocks_for(int64_t n) {
  return int(std::min<int64_t>((n + 255) / 256, 65535 * 4));
}

/// Whether every index of the pooling (input, output, with a grid's stride past the end) fits
/// in int32_t.
bool fits_int32(const pool_geometry& g) {
  int64_t limit = int64_t(INT32_MAX) - int64_t(65535 * 4) * 256;
  return g.n * g.h * g.w * g.c < limit && g.n * g.oh * g.ow * g.c < limit &&
         g.h + g.kh + g.pt < limit && g.w + g.kw + g.pl < limit;
}

template <class T, bool Max>
cudaError_t launch_pool(cudaStream_t s, const T* x, T* y, const pool_geometry& g) {
  int64_t total = g.n * g.oh * g.ow * g.c;
  if (total == 0)
    return cudaSuccess;
  if (fits_int32(g))
    pool_kernel<T, Max, int32_t><<<blocks_for(total), 256, 0, s>>>(x, y, g.as<int32_t>());
  else
    pool_kernel<T, Max, int64_t><<<blocks_for(total), 256, 0, s>>>(x, y, g);
  return cudaGetLastError();
}

template <class T, bool Max>
cudaError_t launch_pool_grad(cudaStream_t s, const T* x, const T* dy, T* dx, const pool_geometry& g) {
  int64_t total = g.n * g.h * g.w * g.c;
  if (total == 0)
    return cudaSuccess;
  if (fits_int32(g))
    pool_grad_kernel<T, Max, int32_t><<<blocks_for(total), 256, 0, s>>>(x, dy, dx, g.as<int32_t>());
  else
    pool_grad_kernel<T, Max, int64_t><<<blocks_for(total), 256, 0, s>>>(x, dy, dx, g);
  return cudaGetLastError();
}

// ---- entries ----

result<pool_geometry> geometry(const shape& in, const gpu_pool_options& o, const std::string& where) {
  if (in.rank() != 4)
    return invalid_argument(where + ": input " + in.to_string() + " must be NHWC");
  if (o.window_h < 1 || o.window_w < 1 || o.stride_h < 1 || o.stride_w < 1)
    return invalid_argument(where + ": windows and strides must be positive");
  pool_geometry g{};
  g.n = in[0], g.h = in[1], g.w = in[2], g.c = in[3];
  g.kh = o.window_h, g.kw = o.window_w, g.sh = o.stride_h, g.sw = o.stride_w;
  auto rows = conv_output_size(g.h, g.kh, g.sh, o.padding);
  auto cols = conv_output_size(g.w, g.kw, g.sw, o.padding);
  if (!rows.ok() || !cols.ok())
    return (rows.ok() ? cols.error() : rows.error()).with_context(where);
  std::tie(g.oh, g.pt) = *rows;
  std::tie(g.ow, g.pl) = *cols;
  return g;
}

status on_device(const tensor& t, const std::string& where, int i) {
  if (t.memory() != memory_space::device)
    return invalid_argument(where + ": input " + std::to_string(i) + " is in " + t.memory_name());
  return {};
}

template <bool Max>
status pool_entry(gpu_context& gpu, const tensor& input, const gpu_pool_options& o, tensor* out,
                  const std::string& node, const char* op) {
  std::string where = "node '" + node + "' (op " + op + ")";
  RUNNEL_RETURN_IF_ERROR(on_device(input, where, 0));
  RUNNEL_ASSIGN_OR_RETURN(auto g, geometry(input.shape(), o, where));
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(input.type(), shape{g.n, g.oh, g.ow, g.c}, node));
  return dispatch_gpu_float(input.type(), where, [&]<class T>() {
    return cuda_status(launch_pool<T, Max>(gpu.compute(), input.data<T>(), out->data<T>(), g), where);
  });
}

template <bool Max>
status pool_grad_entry(gpu_context& gpu, const tensor* input, const shape& in_shape,
                       const tensor& grad, const gpu_pool_options& o, tensor* out,
                       const std::string& node, const char* op) {
  std::string where = "node '" + node + "' (op " + op + ")";
  if (input)
    RUNNEL_RETURN_IF_ERROR(on_device(*input, where, 0));
  RUNNEL_RETURN_IF_ERROR(on_device(grad, where, Max ? 2 : 1));
  RUNNEL_ASSIGN_OR_RETURN(auto g, geometry(in_shape, o, where));
  if (!(grad.shape() == shape{g.n, g.oh, g.ow, g.c}))
    return invalid_argument(where + ": grad has shape " + grad.shape().to_string() + ", expected " +
                            shape{g.n, g.oh, g.ow, g.c}.to_string());
  if (input && input->type() != grad.type())
    return invalid_argument(where + ": orig_input and grad dtypes differ");
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(grad.type(), in_shape, node));
  return dispatch_gpu_float(grad.type(), where, [&]<class T>() {
    return cuda_status(launch_pool_grad<T, Max>(gpu.compute(), input ? input->data<T>() : nullptr,
                                                grad.data<T>(), out->data<T>(), g),
                       where);
  });
}

} // namespace

status max_pool_cuda(gpu_context& gpu, const tensor& input, const gpu_pool_options& o, tensor* out,
                     const std::string& node) {
  return pool_entry<true>(gpu, input, o, out, node, "MaxPool");
}

status avg_pool_cuda(gpu_context& gpu, const tensor& input, const gpu_pool_options& o, tensor* out,
                     const std::string& node) {
  return pool_entry<false>(gpu, input, o, out, node, "AvgPool");
}

status max_pool_grad_cuda(gpu_context& gpu, const tensor& orig_input, const tensor& grad,
                          const gpu_pool_options& o, tensor* out, const std::string& node) {
  return pool_grad_entry<true>(gpu, &orig_input, orig_input.shape(), grad, o, out, node,
                               "MaxPoolGrad");
}

status avg_pool_grad_cuda(gpu_context& gpu, const shape& orig_input_shape, const tensor& grad,
                          const gpu_pool_options& o, tensor* out, const std::string& node) {
  if (orig_input_shape.rank() != 4)
    return invalid_argument("node '" + node + "' (op AvgPoolGrad): orig_input_shape " +
                            orig_input_shape.to_string() + " must have 4 dimensions");
  return pool_grad_entry<false>(gpu, nullptr, orig_input_shape, grad, o, out, node, "AvgPoolGrad");
}

} // namespace runnel
