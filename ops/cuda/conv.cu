// Conv2D and its two backprops on the GPU through cuDNN, NHWC. TensorFlow's filter is HWIO;
// cuDNN's NHWC filter layout is [out, kh, kw, in] (KRSC), so the filter is transposed (a small
// kernel; the filter gradient is transposed back). cuDNN pads symmetrically; SAME padding that
// is not (TensorFlow puts the odd pixel at the end) convolves a zero-padded copy of the input
// (forward, filter gradient) or computes the padded input's gradient and crops it.
//
// A plan per problem (shapes, strides, padding, dtype, math) is made once per GPU context and
// cached: cuDNN's descriptors and, per direction, the fastest algorithm cuDNN measured on the
// first call (cudnnFind*, run twice: TensorFlow's autotuning) whose workspace fits in 256 MiB.
#include <atomic>
#include <mutex>

#include "runnel/ops/cuda/dispatch.hpp"
#include "runnel/ops/cuda/kernels.hpp"
#include "runnel/ops/core/math_functors.hpp"
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

constexpr size_t workspace_limit = size_t(256) << 20;

// ---- kernels ----

/// out[c, r] = in[r, c] for an [rows, cols] matrix: HWIO viewed as [kh·kw·in, out] and back.
template <class T> __global__ void transpose_kernel(const T* in, T* out, int64_t rows, int64_t cols) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < rows * cols;
       idx += int64_t(blockDim.x) * gridDim.x) {
    int64_t r = idx / cols, c = idx % cols;
    out[c * rows + r] = in[idx];
  }
}

/// Copies between [n, h, w, c] and the interior of [n, ph, pw, c] at (pt, pl): pad (Crop =
/// false; the padded buffer is zeroed first) or crop (Crop = true).
template <class T, bool Crop>
__global__ void pad_kernel(const T* in, T* out, int64_t n, int64_t h, int64_t w, int64_t c,
                           int64_t pt, int64_t pl, int64_t ph, int64_t pw) {
  int64_t total = n * h * w * c;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(blockDim.x) * gridDim.x) {
    int64_t ch = idx % c, x = (idx / c) % w, y = (idx / (c * w)) % h, b = idx / (c * w * h);
    int64_t padded = ((b * ph + y + pt) * pw + x + pl) * c + ch;
    if constexpr (Crop)
      out[idx] = in[padded];
    else
      out[padded] = in[idx];
  }
}

// ---- launchers ----

int blocks_for(int64_t n) {
  return int(std::min<int64_t>((n + 255) / 256, 65535 * 4));
}

template <class T>
cudaError_t launch_transpose(cudaStream_t s, const T* in, T* out, int64_t rows, int64_t cols) {
  if (rows * cols == 0)
    return cudaSuccess;
  transpose_kernel<T><<<blocks_for(rows * cols), 256, 0, s>>>(in, out, rows, cols);
  return cudaGetLastError();
}

template <class T, bool Crop>
cudaError_t launch_pad(cudaStream_t s, const T* in, T* out, int64_t n, int64_t h, int64_t w,
                       int64_t c, int64_t pt, int64_t pl, int64_t ph, int64_t pw) {
  if constexpr (!Crop) {
    cudaError_t e = cudaMemsetAsync(out, 0, size_t(n * ph * pw * c) * sizeof(T), s);
    if (e != cudaSuccess)
      return e;
  }
  if (n * h * w * c == 0)
    return cudaSuccess;
  pad_kernel<T, Crop><<<blocks_for(n * h * w * c), 256, 0, s>>>(in, out, n, h, w, c, pt, pl, ph, pw);
  return cudaGetLastError();
}

// ---- plans ----

result<cudnnDataType_t> cudnn_type(dtype t) {
  switch (t) {
    case dtype::f32:
      return CUDNN_DATA_FLOAT;
    case dtype::f16:
      return CUDNN_DATA_HALF;
    case dtype::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return unimplemented("no cuDNN convolution for " + std::string(name(t)));
  }
}

/// One convolution problem: input [n, h, w, c], filter [kh, kw, c, k], output [n, oh, ow, k].
struct conv_problem {
  int64_t n, h, w, c, kh, kw, k, sh, sw, oh, ow, pt, pb, pl, pr;
  dtype type;
  bool tf32;
  bool symmetric() const { return pt == pb && pl == pr; }
  /// The input as cuDNN sees it: padded explicitly when the padding is not symmetric.
  int64_t xh() const { return symmetric() ? h : h + pt + pb; }
  int64_t xw() const { return symmetric() ? w : w + pl + pr; }
  std::string key() const {
    std::string s = "conv";
    for (int64_t v : {n, h, w, c, kh, kw, k, sh, sw, pt, pb, pl, pr, int64_t(type), int64_t(tf32)})
      s += ":" + std::to_string(v);
    return s;
  }
};

result<conv_problem> make_problem(const shape& in, const shape& filter, int64_t sh, int64_t sw,
                                  const std::string& padding, dtype t, bool tf32,
                                  const std::string& where) {
  if (in.rank() != 4 || filter.rank() != 4 || in[3] != filter[2])
    return invalid_argument(where + ": input " + in.to_string() + " (NHWC) and filter " +
                            filter.to_string() + " (HWIO) do not fit");
  conv_problem p{};
  p.n = in[0], p.h = in[1], p.w = in[2], p.c = in[3];
  p.kh = filter[0], p.kw = filter[1], p.k = filter[3], p.sh = sh, p.sw = sw;
  p.type = t, p.tf32 = tf32;
  auto rows = conv_output_size(p.h, p.kh, sh, padding);
  auto cols = conv_output_size(p.w, p.kw, sw, padding);
  if (!rows.ok() || !cols.ok())
    return (rows.ok() ? cols.error() : rows.error()).with_context(where);
  std::tie(p.oh, p.pt) = *rows;
  std::tie(p.ow, p.pl) = *cols;
  p.pb = std::max<int64_t>(0, (p.oh - 1) * sh + p.kh - p.h - p.pt);
  p.pr = std::max<int64_t>(0, (p.ow - 1) * sw + p.kw - p.w - p.pl);
  return p;
}

/// cuDNN's descriptors of one problem and the algorithm chosen per direction (-1: not yet).
struct conv_plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::once_flag fwd_once, data_once, filter_once;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t data{};
  cudnnConvolutionBwdFilterAlgo_t filter{};
  size_t fwd_ws = 0, data_ws = 0, filter_ws = 0;
  status fwd_st, data_st, filter_st;
  std::atomic<bool> fwd_chosen{false};
  ~conv_plan() {
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

result<std::shared_ptr<conv_plan>> plan_for(gpu_context& gpu, const conv_problem& p,
                                            const std::string& where) {
  auto cached = gpu.cached_plan(p.key(), [&]() -> result<std::shared_ptr<void>> {
    RUNNEL_ASSIGN_OR_RETURN(cudnnDataType_t type, cudnn_type(p.type));
    auto d = std::make_shared<conv_plan>();
    int ph = p.symmetric() ? int(p.pt) : 0, pw = p.symmetric() ? int(p.pl) : 0;
    RUNNEL_RETURN_IF_ERROR(cudnn_status(cudnnCreateTensorDescriptor(&d->x), where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(cudnnCreateTensorDescriptor(&d->y), where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(cudnnCreateFilterDescriptor(&d->w), where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(cudnnCreateConvolutionDescriptor(&d->conv), where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NHWC, type, int(p.n), int(p.c), int(p.xh()),
                                   int(p.xw())),
        where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NHWC, type, int(p.n), int(p.k), int(p.oh),
                                   int(p.ow)),
        where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnSetFilter4dDescriptor(d->w, type, CUDNN_TENSOR_NHWC, int(p.k), int(p.c), int(p.kh),
                                   int(p.kw)),
        where));
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnSetConvolution2dDescriptor(d->conv, ph, pw, int(p.sh), int(p.sw), 1, 1,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        where));
    // float32 computes exactly (no TF32) unless asked; 16-bit floats use the tensor cores.
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnSetConvolutionMathType(d->conv, p.type != dtype::f32 || p.tf32 ? CUDNN_TENSOR_OP_MATH
                                                                             : CUDNN_FMA_MATH),
        where));
    return std::shared_ptr<void>(d);
  });
  if (!cached.ok())
    return cached.error();
  return std::static_pointer_cast<conv_plan>(*cached);
}

/// A scratch buffer for cuDNN's algorithm search: as much of the limit as the allocator gives.
tensor search_workspace(gpu_context& gpu, const std::string& node) {
  for (size_t bytes = workspace_limit; bytes >= (size_t(1) << 20); bytes /= 2) {
    auto ws = gpu.allocate(dtype::u8, shape{int64_t(bytes)}, node);
    if (ws.ok())
      return std::move(ws).value();
  }
  return {};
}

/// The fastest successful algorithm of a cudnnFind* result, in cuDNN's order (fastest first).
template <class Perf, class Algo>
status pick(const Perf* perf, int returned, Algo* algo, size_t* ws, const std::string& where) {
  for (int i = 0; i < returned; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) {
      *algo = perf[i].algo;
      *ws = perf[i].memory;
      return {};
    }
  return internal_error(where + ": cuDNN found no algorithm that runs this convolution");
}

/// Runs a cudnnFind* search twice and keeps the second's result: the first also loads each
/// algorithm's kernels (CUDA loads modules lazily), which can make the fastest look slowest.
template <class Find> status search_twice(Find find) {
  status st = find();
  return st.ok() ? find() : st;
}

tensor workspace_for(gpu_context& gpu, size_t bytes, const std::string& node, status* st) {
  if (bytes == 0)
    return {};
  auto ws = gpu.allocate(dtype::u8, shape{int64_t(bytes)}, node);
  if (!ws.ok()) {
    *st = ws.error();
    return {};
  }
  return std::move(ws).value();
}

/// The filter in cuDNN's layout (KRSC), from TensorFlow's HWIO.
template <class T>
result<tensor> to_krsc(gpu_context& gpu, const tensor& hwio, const conv_problem& p,
                       const std::string& node, const std::string& where) {
  RUNNEL_ASSIGN_OR_RETURN(tensor krsc, gpu.allocate(hwio.type(), shape{p.k, p.kh, p.kw, p.c}, node));
  RUNNEL_RETURN_IF_ERROR(cuda_status(
      launch_transpose<T>(gpu.compute(), hwio.data<T>(), krsc.data<T>(), p.kh * p.kw * p.c, p.k),
      where));
  return krsc;
}

/// The input as cuDNN convolves it: itself, or a zero-padded copy for asymmetric padding.
template <class T>
result<tensor> padded_input(gpu_context& gpu, const tensor& input, const conv_problem& p,
                            const std::string& node, const std::string& where) {
  if (p.symmetric())
    return input;
  RUNNEL_ASSIGN_OR_RETURN(tensor x, gpu.allocate(input.type(), shape{p.n, p.xh(), p.xw(), p.c}, node));
  RUNNEL_RETURN_IF_ERROR(cuda_status(
      launch_pad<T, false>(gpu.compute(), input.data<T>(), x.data<T>(), p.n, p.h, p.w, p.c, p.pt,
                           p.pl, p.xh(), p.xw()),
      where));
  return x;
}

status check_inputs(std::initializer_list<const tensor*> ts, const std::string& where) {
  dtype t = (*ts.begin())->type();
  for (auto* x : ts) {
    if (x->memory() != memory_space::device)
      return invalid_argument(where + ": inputs must be in GPU memory, got " + x->memory_name());
    if (x->type() != t)
      return invalid_argument(where + ": inputs have different dtypes (" + std::string(name(t)) +
                              " and " + std::string(name(x->type())) + ")");
  }
  return cudnn_type(t).ok() ? status{} : cudnn_type(t).error().with_context(where);
}

result<shape> sizes_from(const tensor& sizes, const std::string& what, const std::string& where) {
  if (!sizes.host_readable() || sizes.rank() != 1 || sizes.num_elements() != 4)
    return invalid_argument(where + ": " + what + " must be 4 integers in host memory, got " +
                            std::string(name(sizes.type())) + sizes.shape().to_string());
  std::vector<int64_t> dims;
  for (int i = 0; i < 4; ++i)
    dims.push_back(sizes.type() == dtype::i64 ? sizes.data<int64_t>()[i]
                                              : int64_t(sizes.data<int32_t>()[i]));
  for (int64_t d : dims)
    if (d < 0)
      return invalid_argument(where + ": " + what + " " + shape(dims).to_string() +
                              " has a negative size");
  return shape(dims);
}

} // namespace

status conv2d_cuda(gpu_context& gpu, const tensor& input, const tensor& filter,
                   const gpu_conv2d_options& o, tensor* out, const std::string& node) {
  std::string where = "node '" + node + "' (op Conv2D)";
  RUNNEL_RETURN_IF_ERROR(check_inputs({&input, &filter}, where));
  RUNNEL_ASSIGN_OR_RETURN(auto p, make_problem(input.shape(), filter.shape(), o.stride_h,
                                               o.stride_w, o.padding, input.type(), o.allow_tf32,
                                               where));
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(input.type(), shape{p.n, p.oh, p.ow, p.k}, node));
  if (out->num_elements() == 0)
    return {};
  if (input.num_elements() == 0 || filter.num_elements() == 0)
    return cuda_status(cudaMemsetAsync(out->raw_data(), 0, out->bytes(), gpu.compute()), where);
  RUNNEL_ASSIGN_OR_RETURN(auto plan, plan_for(gpu, p, where));
  return dispatch_gpu_float(input.type(), where, [&]<class T>() -> status {
    RUNNEL_ASSIGN_OR_RETURN(tensor krsc, to_krsc<T>(gpu, filter, p, node, where));
    RUNNEL_ASSIGN_OR_RETURN(tensor x, padded_input<T>(gpu, input, p, node, where));
    std::call_once(plan->fwd_once, [&] {
      tensor ws = search_workspace(gpu, node);
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int returned = 0;
      plan->fwd_st = search_twice([&] {
        return cudnn_status(
            cudnnFindConvolutionForwardAlgorithmEx(
                gpu.cudnn(), plan->x, x.raw_data(), plan->w, krsc.raw_data(), plan->conv, plan->y,
                out->raw_data(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, ws.raw_data(),
                ws.valid() ? ws.bytes() : 0),
            where + ": choosing an algorithm");
      });
      if (plan->fwd_st.ok())
        plan->fwd_st = pick(perf, returned, &plan->fwd, &plan->fwd_ws, where);
      plan->fwd_chosen = plan->fwd_st.ok();
    });
    RUNNEL_RETURN_IF_ERROR(plan->fwd_st);
    status st;
    tensor ws = workspace_for(gpu, plan->fwd_ws, node, &st);
    RUNNEL_RETURN_IF_ERROR(st);
    float alpha = 1, beta = 0;
    return cudnn_status(cudnnConvolutionForward(gpu.cudnn(), &alpha, plan->x, x.raw_data(), plan->w,
                                                krsc.raw_data(), plan->conv, plan->fwd,
                                                ws.raw_data(), plan->fwd_ws, &beta, plan->y,
                                                out->raw_data()),
                        where);
  });
}

result<std::pair<int, size_t>> conv2d_cuda_forward_algorithm(gpu_context& gpu, const shape& input,
                                                             const shape& filter, dtype t,
                                                             const gpu_conv2d_options& o) {
  std::string where = "conv2d_cuda_forward_algorithm";
  RUNNEL_ASSIGN_OR_RETURN(auto p, make_problem(input, filter, o.stride_h, o.stride_w, o.padding, t,
                                               o.allow_tf32, where));
  RUNNEL_ASSIGN_OR_RETURN(auto plan, plan_for(gpu, p, where));
  if (!plan->fwd_chosen)
    return not_found(where + ": no forward convolution of these shapes has run on this GPU yet");
  return std::make_pair(int(plan->fwd), plan->fwd_ws);
}

status conv2d_backprop_input_cuda(gpu_context& gpu, const tensor& input_sizes, const tensor& filter,
                                  const tensor& out_backprop, const gpu_conv2d_options& o,
                                  tensor* out, const std::string& node) {
  std::string where = "node '" + node + "' (op Conv2DBackpropInput)";
  RUNNEL_RETURN_IF_ERROR(check_inputs({&filter, &out_backprop}, where));
  RUNNEL_ASSIGN_OR_RETURN(shape in_shape, sizes_from(input_sizes, "input_sizes", where));
  RUNNEL_ASSIGN_OR_RETURN(auto p, make_problem(in_shape, filter.shape(), o.stride_h, o.stride_w,
                                               o.padding, filter.type(), o.allow_tf32, where));
  if (!(out_backprop.shape() == shape{p.n, p.oh, p.ow, p.k}))
    return invalid_argument(where + ": out_backprop has shape " + out_backprop.shape().to_string() +
                            ", the convolution's output is " +
                            shape{p.n, p.oh, p.ow, p.k}.to_string());
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(filter.type(), in_shape, node));
  if (out->num_elements() == 0)
    return {};
  if (out_backprop.num_elements() == 0 || filter.num_elements() == 0)
    return cuda_status(cudaMemsetAsync(out->raw_data(), 0, out->bytes(), gpu.compute()), where);
  RUNNEL_ASSIGN_OR_RETURN(auto plan, plan_for(gpu, p, where));
  return dispatch_gpu_float(filter.type(), where, [&]<class T>() -> status {
    RUNNEL_ASSIGN_OR_RETURN(tensor krsc, to_krsc<T>(gpu, filter, p, node, where));
    // Asymmetric padding: the gradient of the padded input, cropped.
    tensor dx = *out;
    if (!p.symmetric()) {
      RUNNEL_ASSIGN_OR_RETURN(dx, gpu.allocate(filter.type(), shape{p.n, p.xh(), p.xw(), p.c}, node));
    }
    std::call_once(plan->data_once, [&] {
      tensor ws = search_workspace(gpu, node);
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      int returned = 0;
      plan->data_st = search_twice([&] {
        return cudnn_status(
            cudnnFindConvolutionBackwardDataAlgorithmEx(
                gpu.cudnn(), plan->w, krsc.raw_data(), plan->y, out_backprop.raw_data(), plan->conv,
                plan->x, dx.raw_data(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf,
                ws.raw_data(), ws.valid() ? ws.bytes() : 0),
            where + ": choosing an algorithm");
      });
      if (plan->data_st.ok())
        plan->data_st = pick(perf, returned, &plan->data, &plan->data_ws, where);
    });
    RUNNEL_RETURN_IF_ERROR(plan->data_st);
    status st;
    tensor ws = workspace_for(gpu, plan->data_ws, node, &st);
    RUNNEL_RETURN_IF_ERROR(st);
    float alpha = 1, beta = 0;
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnConvolutionBackwardData(gpu.cudnn(), &alpha, plan->w, krsc.raw_data(), plan->y,
                                     out_backprop.raw_data(), plan->conv, plan->data, ws.raw_data(),
                                     plan->data_ws, &beta, plan->x, dx.raw_data()),
        where));
    if (p.symmetric())
      return status{};
    return cuda_status(launch_pad<T, true>(gpu.compute(), dx.data<T>(), out->data<T>(), p.n, p.h,
                                           p.w, p.c, p.pt, p.pl, p.xh(), p.xw()),
                       where);
  });
}

status conv2d_backprop_filter_cuda(gpu_context& gpu, const tensor& input, const tensor& filter_sizes,
                                   const tensor& out_backprop, const gpu_conv2d_options& o,
                                   tensor* out, const std::string& node) {
  std::string where = "node '" + node + "' (op Conv2DBackpropFilter)";
  RUNNEL_RETURN_IF_ERROR(check_inputs({&input, &out_backprop}, where));
  RUNNEL_ASSIGN_OR_RETURN(shape f_shape, sizes_from(filter_sizes, "filter_sizes", where));
  RUNNEL_ASSIGN_OR_RETURN(auto p, make_problem(input.shape(), f_shape, o.stride_h, o.stride_w,
                                               o.padding, input.type(), o.allow_tf32, where));
  if (!(out_backprop.shape() == shape{p.n, p.oh, p.ow, p.k}))
    return invalid_argument(where + ": out_backprop has shape " + out_backprop.shape().to_string() +
                            ", the convolution's output is " +
                            shape{p.n, p.oh, p.ow, p.k}.to_string());
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(input.type(), f_shape, node));
  if (out->num_elements() == 0)
    return {};
  if (out_backprop.num_elements() == 0 || input.num_elements() == 0)
    return cuda_status(cudaMemsetAsync(out->raw_data(), 0, out->bytes(), gpu.compute()), where);
  RUNNEL_ASSIGN_OR_RETURN(auto plan, plan_for(gpu, p, where));
  return dispatch_gpu_float(input.type(), where, [&]<class T>() -> status {
    RUNNEL_ASSIGN_OR_RETURN(tensor x, padded_input<T>(gpu, input, p, node, where));
    RUNNEL_ASSIGN_OR_RETURN(tensor dw, gpu.allocate(input.type(), shape{p.k, p.kh, p.kw, p.c}, node));
    std::call_once(plan->filter_once, [&] {
      tensor ws = search_workspace(gpu, node);
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int returned = 0;
      plan->filter_st = search_twice([&] {
        return cudnn_status(
            cudnnFindConvolutionBackwardFilterAlgorithmEx(
                gpu.cudnn(), plan->x, x.raw_data(), plan->y, out_backprop.raw_data(), plan->conv,
                plan->w, dw.raw_data(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf,
                ws.raw_data(), ws.valid() ? ws.bytes() : 0),
            where + ": choosing an algorithm");
      });
      if (plan->filter_st.ok())
        plan->filter_st = pick(perf, returned, &plan->filter, &plan->filter_ws, where);
    });
    RUNNEL_RETURN_IF_ERROR(plan->filter_st);
    status st;
    tensor ws = workspace_for(gpu, plan->filter_ws, node, &st);
    RUNNEL_RETURN_IF_ERROR(st);
    float alpha = 1, beta = 0;
    RUNNEL_RETURN_IF_ERROR(cudnn_status(
        cudnnConvolutionBackwardFilter(gpu.cudnn(), &alpha, plan->x, x.raw_data(), plan->y,
                                       out_backprop.raw_data(), plan->conv, plan->filter,
                                       ws.raw_data(), plan->filter_ws, &beta, plan->w,
                                       dw.raw_data()),
        where));
    // KRSC [k, kh·kw·c] back to HWIO [kh·kw·c, k].
    return cuda_status(launch_transpose<T>(gpu.compute(), dw.data<T>(), out->data<T>(), p.k,
                                           p.kh * p.kw * p.c),
                       where);
  });
}

} // namespace runnel
