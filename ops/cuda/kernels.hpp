#pragma once
// Entry points of the CUDA kernels (one op family per .cu file: the __global__ kernel, a
// launcher taking a cudaStream_t, and this entry). Inputs are tensors in the context's GPU
// memory; outputs are allocated there. Each entry checks shapes and dtypes like the CPU kernel
// it mirrors and names `node` in its errors. The [.gpu] tests compare every entry with the CPU
// kernel (tests/gpu/gpu_kernels_test.cpp).
#include <span>
#include <string>
#include <utility>

#include "runnel/ops/core/binary_ops.hpp"
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/cuda/gpu_context.hpp"

namespace runnel {

/// A row of ops/core/binary_ops.hpp whose devices are `gpu` or `gpu_floats`, element-wise with
/// NumPy broadcasting (f16, bf16, f32, f64, and i32, i64 where the row allows).
status binary_cuda(gpu_context& gpu, binary_op op, const tensor& a, const tensor& b, tensor* out,
                   const std::string& node);
/// A row of ops/core/unary_ops.hpp, element-wise (floats).
status unary_cuda(gpu_context& gpu, unary_op op, const tensor& x, tensor* out,
                  const std::string& node);
/// _UnaryGrad: dx = grad(x, y, dy) of a row whose functor gives one (floats, one shape).
status unary_grad_cuda(gpu_context& gpu, unary_op op, const tensor& x, const tensor& y,
                       const tensor& dy, tensor* dx, const std::string& node);
/// Cast between the numeric types.
status cast_cuda(gpu_context& gpu, const tensor& x, dtype to, tensor* out, const std::string& node);
/// A new tensor of `t` and `s` with every element `value` (ZerosLike, OnesLike, Fill).
status fill_cuda(gpu_context& gpu, dtype t, const shape& s, double value, tensor* out,
                 const std::string& node);
/// RandomUniform: `t` (f32, f64) values in [0, 1) of shape `s`, the `run`-th draw of the
/// sequence `key` names (counter-based: any element computed on its own).
status random_uniform_cuda(gpu_context& gpu, dtype t, const shape& s, uint64_t key, uint64_t run,
                           tensor* out, const std::string& node);
/// Select: `cond` (bool, in device memory) of t's shape, a vector over its first dimension, or a
/// scalar picks elements of `t` (true) or `e` (false).
status select_cuda(gpu_context& gpu, const tensor& cond, const tensor& t, const tensor& e,
                   tensor* out, const std::string& node);
/// AddN: the element-wise sum of tensors of one dtype and shape.
status add_n_cuda(gpu_context& gpu, std::span<const tensor> xs, tensor* out,
                  const std::string& node);

struct gpu_matmul_options {
  bool transpose_a = false;
  bool transpose_b = false;
  /// float32 inputs multiplied on TF32 tensor cores (10-bit mantissas, float32 accumulation).
  bool allow_tf32 = false;
};
/// C = op(A) · op(B) through cuBLAS (f16, bf16, f32, f64), accumulating in f32 (f64 for f64).
status matmul_cuda(gpu_context& gpu, const tensor& a, const tensor& b, const gpu_matmul_options& o,
                   tensor* out, const std::string& node);

/// value [..., C] + bias [C].
status bias_add_cuda(gpu_context& gpu, const tensor& value, const tensor& bias, tensor* out,
                     const std::string& node);
/// The sum of `grad` over every dimension but the last (floats).
status bias_add_grad_cuda(gpu_context& gpu, const tensor& grad, tensor* out,
                          const std::string& node);
/// Softmax over the last dimension (floats; float accumulation).
status softmax_cuda(gpu_context& gpu, const tensor& logits, tensor* out, const std::string& node);
/// Per row: loss = logsumexp(logits) - logits[label], backprop = softmax - one_hot(label). An
/// out-of-range label gives a NaN loss (TensorFlow's GPU behaviour; the CPU kernel errs).
status sparse_softmax_xent_cuda(gpu_context& gpu, const tensor& logits, const tensor& labels,
                                tensor* loss, tensor* backprop, const std::string& node);

enum class gpu_reduce { sum, mean, max, min };
/// Sum, Mean, Max or Min of `x` (floats) over `axes` (an i32/i64 tensor in host memory).
status reduce_cuda(gpu_context& gpu, gpu_reduce kind, const tensor& x, const tensor& axes,
                   bool keep_dims, tensor* out, const std::string& node);

struct gpu_conv2d_options {
  int64_t stride_h = 1, stride_w = 1;
  std::string padding = "SAME"; ///< "SAME" or "VALID", TensorFlow's rules
  bool allow_tf32 = false;
};
/// Conv2D forward through cuDNN: input NHWC, filter HWIO (f16, bf16, f32).
status conv2d_cuda(gpu_context& gpu, const tensor& input, const tensor& filter,
                   const gpu_conv2d_options& o, tensor* out, const std::string& node);
/// The forward algorithm (cudnnConvolutionFwdAlgo_t) and workspace bytes cuDNN's search chose
/// for this problem on `gpu`, for benchmarks; not_found before such a convolution has run.
result<std::pair<int, size_t>> conv2d_cuda_forward_algorithm(gpu_context& gpu, const shape& input,
                                                             const shape& filter, dtype t,
                                                             const gpu_conv2d_options& o);
/// Conv2D's input gradient: `input_sizes` (4 int32/int64 in host memory) is the input's shape.
status conv2d_backprop_input_cuda(gpu_context& gpu, const tensor& input_sizes, const tensor& filter,
                                  const tensor& out_backprop, const gpu_conv2d_options& o,
                                  tensor* out, const std::string& node);
/// Conv2D's filter gradient: `filter_sizes` (4 int32/int64 in host memory) is the filter's shape.
status conv2d_backprop_filter_cuda(gpu_context& gpu, const tensor& input,
                                   const tensor& filter_sizes, const tensor& out_backprop,
                                   const gpu_conv2d_options& o, tensor* out,
                                   const std::string& node);

struct gpu_pool_options {
  int64_t window_h = 2, window_w = 2, stride_h = 2, stride_w = 2;
  std::string padding = "VALID";
};
/// MaxPool forward, NHWC (floats; any SAME padding: windows clipped to the input).
status max_pool_cuda(gpu_context& gpu, const tensor& input, const gpu_pool_options& o, tensor* out,
                     const std::string& node);
/// AvgPool forward, NHWC (padding is not counted in the average, as in TensorFlow).
status avg_pool_cuda(gpu_context& gpu, const tensor& input, const gpu_pool_options& o, tensor* out,
                     const std::string& node);
/// MaxPool's gradient: each window's gradient goes to its first largest input element.
status max_pool_grad_cuda(gpu_context& gpu, const tensor& orig_input, const tensor& grad,
                          const gpu_pool_options& o, tensor* out, const std::string& node);
/// AvgPool's gradient: each window's gradient spread evenly over the input elements it covers.
status avg_pool_grad_cuda(gpu_context& gpu, const shape& orig_input_shape, const tensor& grad,
                          const gpu_pool_options& o, tensor* out, const std::string& node);

enum class gpu_apply_rule { gradient_descent, momentum, adagrad, rmsprop, adam };
/// One optimizer step in place on `var` and its slots (device tensors of var's shape: Momentum's
/// and Adagrad's accumulator; RMSProp's ms and mom; Adam's m and v), with `scalars` in the Apply
/// op's input order (each in device or host memory) and a gradient of var's shape (f32, f64).
/// `op` names the op in errors.
status apply_cuda(gpu_context& gpu, gpu_apply_rule rule, bool nesterov, const tensor& var,
                  std::span<const tensor> slots, std::span<const tensor> scalars,
                  const tensor& grad, const std::string& node, const char* op);
/// The same step on several variables sharing their scalars (the multi-tensor form: one launch
/// per 16 variables instead of one each); `slots[k]` are variable k's slots.
status multi_apply_cuda(gpu_context& gpu, gpu_apply_rule rule, bool nesterov,
                        std::span<const tensor> vars, std::span<const std::vector<tensor>> slots,
                        std::span<const tensor> scalars, std::span<const tensor> grads,
                        const std::string& node, const char* op);
/// The SparseApply* form: only the rows `indices` (int32/int64 in host memory) of var and its
/// slots change, with gradient rows `grad` [len(indices), ...]; duplicate indices are summed.
status sparse_apply_cuda(gpu_context& gpu, gpu_apply_rule rule, bool nesterov, const tensor& var,
                         std::span<const tensor> slots, std::span<const tensor> scalars,
                         const tensor& grad, const tensor& indices, const std::string& node,
                         const char* op);
/// GatherV2: params' slices at `indices` (host memory, checked against params) along `axis`.
status gather_cuda(gpu_context& gpu, const tensor& params, const tensor& indices, int64_t axis,
                   tensor* out, const std::string& node);
/// UnsortedSegmentSum: rows of `data` summed by `segment_ids` (host memory; negative ids are
/// dropped) into [num_segments, ...].
status unsorted_segment_sum_cuda(gpu_context& gpu, const tensor& data, const tensor& segment_ids,
                                 int64_t num_segments, tensor* out, const std::string& node);
enum class gpu_scatter { add, sub, update };
/// ScatterAdd/Sub/Update in place on `var`'s rows `indices` (host memory); duplicates add up
/// (update: the last one wins, as on the CPU).
status scatter_cuda(gpu_context& gpu, gpu_scatter kind, const tensor& var, const tensor& indices,
                    const tensor& updates, const std::string& node, const char* op);

struct gpu_lstm_options {
  float forget_bias = 1, cell_clip = -1;
  bool use_peephole = false;
};
/// LSTMBlockCell (float32): inputs x, cs_prev, h_prev, w, wci, wcf, wco, b; outputs i, cs, f, o,
/// ci, co, h (ops/layers/lstm_block.hpp).
status lstm_block_cell_cuda(gpu_context& gpu, std::span<const tensor> in, const gpu_lstm_options& o,
                            std::span<tensor> out, const std::string& node);
/// LSTMBlockCellGrad: the cell's 8 inputs, its outputs but h, cs_grad and h_grad; outputs
/// cs_prev_grad, dicfo [batch, 4·cell] and the three peephole gradients (zeros without them).
status lstm_block_cell_grad_cuda(gpu_context& gpu, std::span<const tensor> in, bool use_peephole,
                                 std::span<tensor> out, const std::string& node);
/// BlockLSTM: seq_len_max (int64, on the host), x [time, batch, input], then the cell's inputs;
/// outputs i, cs, f, o, ci, co, h, each [time, batch, cell].
status block_lstm_cuda(gpu_context& gpu, std::span<const tensor> in, const gpu_lstm_options& o,
                       std::span<tensor> out, const std::string& node);
/// BlockLSTMGrad: BlockLSTM's 9 inputs, its 7 outputs, cs_grad and h_grad; outputs the 8
/// gradients (x, cs_prev, h_prev, w, wci, wcf, wco, b).
status block_lstm_grad_cuda(gpu_context& gpu, std::span<const tensor> in, bool use_peephole,
                            std::span<tensor> out, const std::string& node);

} // namespace runnel
