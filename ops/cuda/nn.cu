// NN kernels on the GPU: BiasAdd and its gradient, Softmax and the sparse softmax
// cross-entropy. Rows of a softmax are one block each (block reductions in shared memory);
// 16-bit floats compute through float.
#include <algorithm>

#include "runnel/ops/cuda/dispatch.hpp"
#include "runnel/ops/cuda/kernels.hpp"
#include "runnel/ops/core/math_functors.hpp"

namespace runnel {
namespace {

constexpr int row_threads = 256;

// ---- kernels ----

/// Accumulation in float, or double for double.
template <class T> using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// BiasAddGrad sums a [rows, cols] matrix over its rows. A block is 32 columns by 8 row lanes
// (a warp reads 32 neighbouring columns of a row: coalesced) over one chunk of the rows; the
// lanes meet in shared memory and the block writes one partial sum per column. Chunks spread
// tall matrices (a conv layer's [batch*h*w, channels]) over the whole GPU; a second kernel adds
// the chunks' partials in a fixed order, so the result does not vary from run to run.
constexpr int bias_cols = 32, bias_lanes = 8;

template <class T>
__global__ void bias_grad_partial_kernel(const T* g, acc_t<T>* partial, int64_t rows, int64_t cols,
                                         int64_t rows_per_chunk) {
  __shared__ acc_t<T> lanes[bias_lanes][bias_cols + 1];
  int64_t c = int64_t(blockIdx.x) * bias_cols + threadIdx.x;
  int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  int64_t r1 = min(r0 + rows_per_chunk, rows);
  acc_t<T> acc = 0;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += bias_lanes)
      acc += acc_t<T>(to_compute(g[r * cols + c]));
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int l = 1; l < bias_lanes; ++l)
      acc += lanes[l][threadIdx.x];
    partial[int64_t(blockIdx.y) * cols + c] = acc;
  }
}

template <class T>
__global__ void bias_grad_finish_kernel(const acc_t<T>* partial, T* out, int64_t chunks, int64_t cols) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols;
       c += int64_t(blockDim.x) * gridDim.x) {
    acc_t<T> acc = 0;
    for (int64_t k = 0; k < chunks; ++k)
      acc += partial[k * cols + c];
    out[c] = from_compute<T>(compute_t<T>(acc));
  }
}

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

/// How BiasAddGrad splits its rows: chunks of at least 256 rows, about 8 blocks per SM's worth
/// (1056 blocks on 132 SMs) in all, at most 4096 chunks.
int64_t bias_grad_chunks(int64_t rows, int64_t cols) {
  int64_t col_blocks = (cols + bias_cols - 1) / bias_cols;
  int64_t want = std::max<int64_t>(1, 1024 / col_blocks);
  return std::max<int64_t>(1, std::min({want, (rows + 255) / 256, int64_t(4096)}));
}

template <class T>
cudaError_t launch_bias_grad(cudaStream_t s, const T* g, acc_t<T>* partial, T* out, int64_t rows,
                             int64_t cols, int64_t chunks) {
  if (cols == 0)
    return cudaSuccess;
  int64_t col_blocks = (cols + bias_cols - 1) / bias_cols;
  if (col_blocks > int64_t(INT32_MAX))
    return cudaErrorInvalidValue;
  int64_t per_chunk = (rows + chunks - 1) / chunks;
  bias_grad_partial_kernel<T><<<dim3(unsigned(col_blocks), unsigned(chunks)),
                                dim3(bias_cols, bias_lanes), 0, s>>>(g, partial, rows, cols,
                                                                     std::max<int64_t>(per_chunk, 1));
  int blocks = int(std::min<int64_t>((cols + 255) / 256, 4096));
  bias_grad_finish_kernel<T><<<blocks, 256, 0, s>>>(partial, out, chunks, cols);
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
  return binary_cuda(gpu, binary_op::Add, value, bias, out, node);
}

status bias_add_grad_cuda(gpu_context& gpu, const tensor& grad, tensor* out,
                          const std::string& node) {
  std::string where = "node '" + node + "' (op BiasAddGrad)";
  RUNNEL_RETURN_IF_ERROR(on_device(grad, where, 0));
  if (grad.rank() < 1)
    return invalid_argument(where + ": needs rank >= 1, got " + grad.shape().to_string());
  int64_t cols = grad.dim(grad.rank() - 1), rows = cols ? grad.num_elements() / cols : 0;
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(grad.type(), shape{cols}, node));
  if (cols == 0)
    return {};
  int64_t chunks = bias_grad_chunks(rows, cols);
  return dispatch_gpu_float(grad.type(), where, [&]<class T>() -> status {
    // The partial sums live until the stream has run the kernels (freed now, reused only by
    // work ordered after them).
    RUNNEL_ASSIGN_OR_RETURN(
        tensor partial,
        gpu.allocate(std::is_same_v<T, double> ? dtype::f64 : dtype::f32, shape{chunks, cols}, node));
    return cuda_status(launch_bias_grad<T>(gpu.compute(), grad.data<T>(),
                                           static_cast<acc_t<T>*>(partial.raw_data()),
                                           out->data<T>(), rows, cols, chunks),
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
