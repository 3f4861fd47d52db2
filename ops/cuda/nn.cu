// NN kernels on the GPU: BiasAdd and its gradient, Softmax and the sparse softmax
// cross-entropy. Rows of a softmax are one block each (block reductions in shared memory);
// 16-bit floats compute through float.
#include "runnel/ops/cuda/dispatch.hpp"
#include "runnel/ops/cuda/kernels.hpp"
#include "runnel/ops/core/math_functors.hpp"

namespace runnel {
namespace {

constexpr int row_threads = 256;

// ---- kernels ----

template <class T> __global__ void bias_grad_kernel(const T* g, T* out, int64_t rows, int64_t cols) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols;
       c += int64_t(blockDim.x) * gridDim.x) {
    compute_t<T> acc = 0;
    for (int64_t r = 0; r < rows; ++r)
      acc += to_compute(g[r * cols + c]);
    out[c] = from_compute<T>(acc);
  }
}

/// Accumulation in float, or double for double.
template <class T> using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

/// Reduces `v` over the block (max or sum); every thread gets the result.
template <bool Max, class A> __device__ A block_reduce(A v, A* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      shared[threadIdx.x] = Max ? (shared[threadIdx.x + s] > shared[threadIdx.x]
                                       ? shared[threadIdx.x + s]
                                       : shared[threadIdx.x])
                                : shared[threadIdx.x] + shared[threadIdx.x + s];
    __syncthreads();
  }
  A r = shared[0];
  __syncthreads();
  return r;
}

/// One block per row: softmax (Labels = void) or the sparse cross-entropy's loss and backprop.
template <class T, class Label>
__global__ void softmax_rows_kernel(const T* x, const Label* labels, T* probs, T* loss, int64_t cols) {
  using A = acc_t<T>;
  __shared__ A shared[row_threads];
  const T* row = x + blockIdx.x * cols;
  T* out = probs + blockIdx.x * cols;
  A m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    A v = A(to_compute(row[c]));
    m = v > m ? v : m;
  }
  m = block_reduce<true>(m, shared);
  A sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    sum += exp(A(to_compute(row[c])) - m);
  sum = block_reduce<false>(sum, shared);
  int64_t label = -1;
  if constexpr (!std::is_void_v<Label>)
    label = int64_t(labels[blockIdx.x]);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    A p = exp(A(to_compute(row[c])) - m) / sum;
    if constexpr (!std::is_void_v<Label>)
      p -= c == label ? A(1) : A(0);
    out[c] = from_compute<T>(compute_t<T>(p));
  }
  if constexpr (!std::is_void_v<Label>) {
    if (threadIdx.x == 0) {
      // An out-of-range label gives NaN, as TensorFlow's GPU kernel does (the CPU one errs).
      A l = label >= 0 && label < cols ? log(sum) + m - A(to_compute(row[label])) : A(NAN);
      loss[blockIdx.x] = from_compute<T>(compute_t<T>(l));
    }
  }
}

// ---- launchers ----

template <class T>
cudaError_t launch_bias_grad(cudaStream_t s, const T* g, T* out, int64_t rows, int64_t cols) {
  if (cols == 0)
    return cudaSuccess;
  int blocks = int(std::min<int64_t>((cols + 255) / 256, 4096));
  bias_grad_kernel<T><<<blocks, 256, 0, s>>>(g, out, rows, cols);
  return cudaGetLastError();
}

template <class T, class Label>
cudaError_t launch_softmax_rows(cudaStream_t s, const T* x, const Label* labels, T* probs, T* loss,
                                int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0)
    return cudaSuccess;
  if (rows > int64_t(INT32_MAX))
    return cudaErrorInvalidValue;
  softmax_rows_kernel<T, Label><<<unsigned(rows), row_threads, 0, s>>>(x, labels, probs, loss, cols);
  return cudaGetLastError();
}

// ---- entries ----

status on_device(const tensor& t, const std::string& where, int i) {
  if (t.memory() != memory_space::device)
    return invalid_argument(where + ": input " + std::to_string(i) + " is in " + t.memory_name());
  return {};
}

} // namespace

status bias_add_cuda(gpu_context& gpu, const tensor& value, const tensor& bias, tensor* out,
                     const std::string& node) {
  std::string where = "node '" + node + "' (op BiasAdd)";
  if (bias.rank() != 1 || value.rank() < 1 || value.dim(value.rank() - 1) != bias.dim(0))
    return invalid_argument(where + ": bias " + bias.shape().to_string() +
                            " must be a vector as long as the last dimension of " +
                            value.shape().to_string());
  // value [..., C] + bias [C] is the broadcasting add.
  return binary_cuda(gpu, gpu_binary::add, value, bias, out, node);
}

status bias_add_grad_cuda(gpu_context& gpu, const tensor& grad, tensor* out,
                          const std::string& node) {
  std::string where = "node '" + node + "' (op BiasAddGrad)";
  RUNNEL_RETURN_IF_ERROR(on_device(grad, where, 0));
  if (grad.rank() < 1)
    return invalid_argument(where + ": needs rank >= 1, got " + grad.shape().to_string());
  int64_t cols = grad.dim(grad.rank() - 1), rows = cols ? grad.num_elements() / cols : 0;
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(grad.type(), shape{cols}, node));
  return dispatch_gpu_float(grad.type(), where, [&]<class T>() {
    return cuda_status(launch_bias_grad<T>(gpu.compute(), grad.data<T>(), out->data<T>(), rows, cols),
                       where);
  });
}

status softmax_cuda(gpu_context& gpu, const tensor& logits, tensor* out, const std::string& node) {
  std::string where = "node '" + node + "' (op Softmax)";
  RUNNEL_RETURN_IF_ERROR(on_device(logits, where, 0));
  if (logits.rank() < 1)
    return invalid_argument(where + ": logits must have rank >= 1");
  int64_t cols = logits.dim(logits.rank() - 1), rows = cols ? logits.num_elements() / cols : 0;
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(logits.type(), logits.shape(), node));
  return dispatch_gpu_float(logits.type(), where, [&]<class T>() {
    return cuda_status(launch_softmax_rows<T, void>(gpu.compute(), logits.data<T>(), nullptr,
                                                    out->data<T>(), nullptr, rows, cols),
                       where);
  });
}

status sparse_softmax_xent_cuda(gpu_context& gpu, const tensor& logits, const tensor& labels,
                                tensor* loss, tensor* backprop, const std::string& node) {
  std::string where = "node '" + node + "' (op SparseSoftmaxCrossEntropyWithLogits)";
  RUNNEL_RETURN_IF_ERROR(on_device(logits, where, 0));
  RUNNEL_RETURN_IF_ERROR(on_device(labels, where, 1));
  if (logits.rank() != 2 || labels.rank() != 1 || labels.dim(0) != logits.dim(0))
    return invalid_argument(where + ": logits " + logits.shape().to_string() + " and labels " +
                            labels.shape().to_string() + " must be [batch, classes] and [batch]");
  int64_t rows = logits.dim(0), cols = logits.dim(1);
  RUNNEL_ASSIGN_OR_RETURN(*loss, gpu.allocate(logits.type(), shape{rows}, node));
  RUNNEL_ASSIGN_OR_RETURN(*backprop, gpu.allocate(logits.type(), logits.shape(), node));
  return dispatch_gpu_float(logits.type(), where, [&]<class T>() -> status {
    cudaError_t e;
    if (labels.type() == dtype::i32)
      e = launch_softmax_rows<T, int32_t>(gpu.compute(), logits.data<T>(), labels.data<int32_t>(),
                                          backprop->data<T>(), loss->data<T>(), rows, cols);
    else if (labels.type() == dtype::i64)
      e = launch_softmax_rows<T, int64_t>(gpu.compute(), logits.data<T>(), labels.data<int64_t>(),
                                          backprop->data<T>(), loss->data<T>(), rows, cols);
    else
      return invalid_argument(where + ": labels must be int32 or int64");
    return cuda_status(e, where);
  });
}

} // namespace runnel
