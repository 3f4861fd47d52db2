// Conv2D forward on the GPU through cuDNN, and max pooling (our kernel), NHWC. TensorFlow's filter is HWIO; cuDNN's NHWC
// filter layout is [out, kh, kw, in] (KRSC), so the filter is transposed first (a small kernel).
// cuDNN pads symmetrically; SAME padding that is not (TensorFlow puts the odd pixel at the end)
// copies the input into a zero-padded buffer and convolves without padding.
#include "runnel/ops/cuda/dispatch.hpp"
#include "runnel/ops/cuda/kernels.hpp"
#include "runnel/ops/math_functors.hpp"
#include "runnel/ops/op_def.hpp"

namespace runnel {
namespace {

// ---- kernels ----

/// out[o, i] = in[i, o] for an [rows, cols] matrix: HWIO viewed as [kh·kw·in, out].
template <class T> __global__ void transpose_kernel(const T* in, T* out, int64_t rows, int64_t cols) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < rows * cols;
       idx += int64_t(blockDim.x) * gridDim.x) {
    int64_t r = idx / cols, c = idx % cols;
    out[c * rows + r] = in[idx];
  }
}

/// Copies [n, h, w, c] into the interior of a zeroed [n, h + pt + pb, w + pl + pr, c].
template <class T>
__global__ void pad_kernel(const T* in, T* out, int64_t n, int64_t h, int64_t w, int64_t c,
                           int64_t pt, int64_t pl, int64_t oh, int64_t ow) {
  int64_t total = n * h * w * c;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(blockDim.x) * gridDim.x) {
    int64_t ch = idx % c, x = (idx / c) % w, y = (idx / (c * w)) % h, b = idx / (c * w * h);
    out[((b * oh + y + pt) * ow + x + pl) * c + ch] = in[idx];
  }
}

/// Max pooling, one thread per output element; windows are clipped to the input (TensorFlow's
/// SAME padding never wins a max).
template <class T>
__global__ void max_pool_kernel(const T* x, T* y, int64_t n, int64_t h, int64_t w, int64_t c,
                                int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t sh,
                                int64_t sw, int64_t pt, int64_t pl) {
  int64_t total = n * oh * ow * c;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(blockDim.x) * gridDim.x) {
    int64_t ch = idx % c, ox = (idx / c) % ow, oy = (idx / (c * ow)) % oh, b = idx / (c * ow * oh);
    int64_t y0 = oy * sh - pt, x0 = ox * sw - pl;
    float best = -INFINITY;
    for (int64_t yy = max(y0, int64_t(0)); yy < min(y0 + kh, h); ++yy)
      for (int64_t xx = max(x0, int64_t(0)); xx < min(x0 + kw, w); ++xx) {
        float v = float(to_compute(x[((b * h + yy) * w + xx) * c + ch]));
        best = v > best || v != v ? v : best;
      }
    y[idx] = from_compute<T>(compute_t<T>(best));
  }
}

// ---- launchers ----

int blocks_for(int64_t n) {
  return int(std::min<int64_t>((n + 255) / 256, 65535));
}

template <class T>
cudaError_t launch_transpose(cudaStream_t s, const T* in, T* out, int64_t rows, int64_t cols) {
  if (rows * cols == 0)
    return cudaSuccess;
  transpose_kernel<T><<<blocks_for(rows * cols), 256, 0, s>>>(in, out, rows, cols);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_pad(cudaStream_t s, const T* in, T* out, int64_t n, int64_t h, int64_t w,
                       int64_t c, int64_t pt, int64_t pl, int64_t oh, int64_t ow) {
  cudaError_t e = cudaMemsetAsync(out, 0, size_t(n * oh * ow * c) * sizeof(T), s);
  if (e != cudaSuccess || n * h * w * c == 0)
    return e;
  pad_kernel<T><<<blocks_for(n * h * w * c), 256, 0, s>>>(in, out, n, h, w, c, pt, pl, oh, ow);
  return cudaGetLastError();
}

/// cuDNN descriptors of one call, destroyed with it.
struct conv_descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~conv_descriptors() {
    if (x)
      cudnnDestroyTensorDescriptor(x);
    if (y)
      cudnnDestroyTensorDescriptor(y);
    if (w)
      cudnnDestroyFilterDescriptor(w);
    if (conv)
      cudnnDestroyConvolutionDescriptor(conv);
  }
};

result<cudnnDataType_t> cudnn_type(dtype t) {
  switch (t) {
    case dtype::f32:
      return CUDNN_DATA_FLOAT;
    case dtype::f16:
      return CUDNN_DATA_HALF;
    case dtype::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return unimplemented("Conv2D has no GPU kernel for " + std::string(name(t)));
  }
}

} // namespace

status max_pool_cuda(gpu_context& gpu, const tensor& input, const gpu_pool_options& o, tensor* out,
                     const std::string& node) {
  std::string where = "node '" + node + "' (op MaxPool)";
  if (input.memory() != memory_space::device)
    return invalid_argument(where + ": input 0 is in " + input.memory_name());
  if (input.rank() != 4)
    return invalid_argument(where + ": input " + input.shape().to_string() + " must be NHWC");
  int64_t n = input.dim(0), h = input.dim(1), w = input.dim(2), c = input.dim(3);
  auto rows = conv_output_size(h, o.window_h, o.stride_h, o.padding);
  auto cols = conv_output_size(w, o.window_w, o.stride_w, o.padding);
  if (!rows.ok() || !cols.ok())
    return (rows.ok() ? cols.error() : rows.error()).with_context(where);
  auto [oh, pt] = *rows;
  auto [ow, pl] = *cols;
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(input.type(), shape{n, oh, ow, c}, node));
  int64_t total = out->num_elements();
  if (total == 0)
    return {};
  return dispatch_gpu_float(input.type(), where, [&]<class T>() {
    max_pool_kernel<T><<<blocks_for(total), 256, 0, gpu.compute()>>>(
        input.data<T>(), out->data<T>(), n, h, w, c, oh, ow, o.window_h, o.window_w, o.stride_h,
        o.stride_w, pt, pl);
    return cuda_status(cudaGetLastError(), where);
  });
}

status conv2d_cuda(gpu_context& gpu, const tensor& input, const tensor& filter,
                   const gpu_conv2d_options& o, tensor* out, const std::string& node) {
  std::string where = "node '" + node + "' (op Conv2D)";
  if (input.memory() != memory_space::device || filter.memory() != memory_space::device)
    return invalid_argument(where + ": inputs must be in GPU memory");
  if (input.rank() != 4 || filter.rank() != 4 || input.dim(3) != filter.dim(2))
    return invalid_argument(where + ": input " + input.shape().to_string() + " (NHWC) and filter " +
                            filter.shape().to_string() + " (HWIO) do not fit");
  if (input.type() != filter.type())
    return invalid_argument(where + ": input and filter dtypes differ");
  auto type = cudnn_type(input.type());
  if (!type.ok())
    return type.error().with_context(where);
  int64_t n = input.dim(0), h = input.dim(1), w = input.dim(2), c = input.dim(3);
  int64_t kh = filter.dim(0), kw = filter.dim(1), k = filter.dim(3);
  auto rows = conv_output_size(h, kh, o.stride_h, o.padding);
  auto cols = conv_output_size(w, kw, o.stride_w, o.padding);
  if (!rows.ok() || !cols.ok())
    return (rows.ok() ? cols.error() : rows.error()).with_context(where);
  auto [oh, pt] = *rows;
  auto [ow, pl] = *cols;
  int64_t pb = std::max<int64_t>(0, (oh - 1) * o.stride_h + kh - h - pt);
  int64_t pr = std::max<int64_t>(0, (ow - 1) * o.stride_w + kw - w - pl);
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(input.type(), shape{n, oh, ow, k}, node));
  if (out->num_elements() == 0)
    return {};
  cudaStream_t s = gpu.compute();
  return dispatch_gpu_float(input.type(), where, [&]<class T>() -> status {
    // The filter in cuDNN's layout.
    RUNNEL_ASSIGN_OR_RETURN(tensor krsc, gpu.allocate(filter.type(), shape{k, kh, kw, c}, node));
    RUNNEL_RETURN_IF_ERROR(cuda_status(
        launch_transpose<T>(s, filter.data<T>(), krsc.data<T>(), kh * kw * c, k), where));
    // Asymmetric padding: pad explicitly.
    tensor x = input;
    int64_t xh = h, xw = w, ph = pt, pw = pl;
    if (pt != pb || pl != pr) {
      xh = h + pt + pb;
      xw = w + pl + pr;
      RUNNEL_ASSIGN_OR_RETURN(x, gpu.allocate(input.type(), shape{n, xh, xw, c}, node));
      RUNNEL_RETURN_IF_ERROR(cuda_status(
          launch_pad<T>(s, input.data<T>(), x.data<T>(), n, h, w, c, pt, pl, xh, xw), where));
      ph = pw = 0;
    }
    conv_descriptors d;
    RUNNEL_RETURN_IF_ERROR(cudnn_status(cudnnCreateTensorDescriptor(&d.x), where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(cudnnCreateTensorDescriptor(&d.y), where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(cudnnCreateFilterDescriptor(&d.w), where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(cudnnCreateConvolutionDescriptor(&d.conv), where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NHWC, *type, int(n), int(c), int(xh), int(xw)),
        where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NHWC, *type, int(n), int(k), int(oh), int(ow)),
        where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnSetFilter4dDescriptor(d.w, *type, CUDNN_TENSOR_NHWC, int(k), int(c), int(kh), int(kw)),
        where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnSetConvolution2dDescriptor(d.conv, int(ph), int(pw), int(o.stride_h), int(o.stride_w),
                                        1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        where));
    if (input.type() != dtype::f32 || o.allow_tf32)
      cudnnSetConvolutionMathType(d.conv, CUDNN_TENSOR_OP_MATH);
    else
      cudnnSetConvolutionMathType(d.conv, CUDNN_FMA_MATH); // float32 exactly, no TF32
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int returned = 0;
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnGetConvolutionForwardAlgorithm_v7(gpu.cudnn(), d.x, d.w, d.conv, d.y, 8, &returned,
                                               perf),
        where));
    float alpha = 1, beta = 0;
    status last = internal_error(where + ": cuDNN offered no forward algorithm");
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS)
        continue;
      tensor workspace;
      if (perf[i].memory > 0) {
        auto ws = gpu.allocate(dtype::u8, shape{int64_t(perf[i].memory)}, node);
        if (!ws.ok()) { // too large for the memory left: try the next algorithm
          last = ws.error();
          continue;
        }
        workspace = std::move(ws).value();
      }
      last = cudnn_status(cudnnConvolutionForward(gpu.cudnn(), &alpha, d.x, x.raw_data(), d.w,
                                                  krsc.raw_data(), d.conv, perf[i].algo,
                                                  workspace.raw_data(), perf[i].memory, &beta,
                                                  d.y, out->raw_data()),
                          where);
      if (last.ok())
        break;
    }
    return last;
  });
}

} // namespace runnel
