// CUDA kernels of the nn, conv and lstm_block families: BiasAdd, Softmax, the sparse
// cross-entropy (nn); Conv2D and its backprops (cuDNN), pooling and its gradients (conv); the
// fused LSTM block.
#include "runnel/ops/cuda/cuda_kernel.hpp"
#include "runnel/ops/cuda/kernels.hpp"

namespace runnel {
namespace {

gpu_conv2d_options conv_options(const window_attrs& w) {
  return {.stride_h = w.stride_h, .stride_w = w.stride_w, .padding = w.padding};
}

gpu_pool_options pool_options(const window_attrs& w) {
  return {.window_h = w.window_h, .window_w = w.window_w, .stride_h = w.stride_h,
          .stride_w = w.stride_w, .padding = w.padding};
}

using inputs = cuda_kernel::inputs;

} // namespace

/// Bias, softmax and losses.
RUNNEL_CUDA_KERNEL_FAMILY(nn) {
  t.emplace("BiasAdd", [](const kernel_construction& c, cuda_device& d) {
    return one_output(d, [name = c.node.name](gpu_context& g, inputs in, tensor* out) {
      return bias_add_cuda(g, in[0], in[1], out, name);
    });
  });
  t.emplace("Softmax", [](const kernel_construction& c, cuda_device& d) {
    return one_output(d, [name = c.node.name](gpu_context& g, inputs in, tensor* out) {
      return softmax_cuda(g, in[0], out, name);
    });
  });
  t.emplace("SparseSoftmaxCrossEntropyWithLogits", [](const kernel_construction& c, cuda_device& d) {
    return result<std::unique_ptr<kernel>>(std::make_unique<cuda_kernel>(
        d, [name = c.node.name](gpu_context& g, inputs in, kernel_context& ctx) -> status {
          tensor loss, backprop;
          RUNNEL_RETURN_IF_ERROR(sparse_softmax_xent_cuda(g, in[0], in[1], &loss, &backprop, name));
          ctx.set_output(0, std::move(loss));
          ctx.set_output(1, std::move(backprop));
          return {};
        }));
  });
}

/// Convolutions and pooling.
RUNNEL_CUDA_KERNEL_FAMILY(conv) {
  t.emplace("Conv2D", [](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
    RUNNEL_ASSIGN_OR_RETURN(auto w, read_window_attrs(c, false));
    return one_output(d, [o = conv_options(w), name = c.node.name](gpu_context& g, inputs in,
                                                                  tensor* out) {
      return conv2d_cuda(g, in[0], in[1], o, out, name);
    });
  });
  t.emplace("Conv2DBackpropInput",
            [](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
              RUNNEL_ASSIGN_OR_RETURN(auto w, read_window_attrs(c, false));
              return one_output(
                  d,
                  [o = conv_options(w), name = c.node.name](gpu_context& g, inputs in, tensor* out) {
                    return conv2d_backprop_input_cuda(g, in[0], in[1], in[2], o, out, name);
                  },
                  {slot_memory::host}); // input_sizes on the host
            });
  t.emplace("Conv2DBackpropFilter",
            [](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
              RUNNEL_ASSIGN_OR_RETURN(auto w, read_window_attrs(c, false));
              return one_output(
                  d,
                  [o = conv_options(w), name = c.node.name](gpu_context& g, inputs in, tensor* out) {
                    return conv2d_backprop_filter_cuda(g, in[0], in[1], in[2], o, out, name);
                  },
                  {slot_memory::device, slot_memory::host}); // filter_sizes on the host
            });
  t.emplace("MaxPool", [](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
    RUNNEL_ASSIGN_OR_RETURN(auto w, read_window_attrs(c, true));
    return one_output(d, [o = pool_options(w), name = c.node.name](gpu_context& g, inputs in,
                                                                  tensor* out) {
      return max_pool_cuda(g, in[0], o, out, name);
    });
  });
  t.emplace("AvgPool", [](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
    RUNNEL_ASSIGN_OR_RETURN(auto w, read_window_attrs(c, true));
    return one_output(d, [o = pool_options(w), name = c.node.name](gpu_context& g, inputs in,
                                                                  tensor* out) {
      return avg_pool_cuda(g, in[0], o, out, name);
    });
  });
  t.emplace("MaxPoolGrad",
            [](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
              RUNNEL_ASSIGN_OR_RETURN(auto w, read_window_attrs(c, true));
              // orig_output (input 1) is not needed: the argmax is found again in orig_input.
              return one_output(d, [o = pool_options(w), name = c.node.name](gpu_context& g,
                                                                            inputs in, tensor* out) {
                return max_pool_grad_cuda(g, in[0], in[2], o, out, name);
              });
            });
  t.emplace("AvgPoolGrad",
            [](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
              RUNNEL_ASSIGN_OR_RETURN(auto w, read_window_attrs(c, true));
              return one_output(
                  d,
                  [o = pool_options(w), name = c.node.name](gpu_context& g, inputs in,
                                                            tensor* out) -> status {
                    const tensor& sizes = in[0];
                    if (sizes.rank() != 1 || sizes.num_elements() != 4 ||
                        (sizes.type() != dtype::i32 && sizes.type() != dtype::i64))
                      return invalid_argument("node '" + name +
                                              "' (op AvgPoolGrad): orig_input_shape must be 4 "
                                              "integers, got " + sizes.shape().to_string());
                    std::vector<int64_t> dims;
                    for (int i = 0; i < 4; ++i)
                      dims.push_back(sizes.type() == dtype::i32 ? sizes.data<int32_t>()[i]
                                                                : sizes.data<int64_t>()[i]);
                    return avg_pool_grad_cuda(g, shape(dims), in[1], o, out, name);
                  },
                  {slot_memory::host}); // orig_input_shape on the host
            });
}

/// The LSTM block kernels.
RUNNEL_CUDA_KERNEL_FAMILY(lstm_block) {
  t.emplace("LSTMBlockCell", [](const kernel_construction& c, cuda_device& d) {
    gpu_lstm_options o{.forget_bias = float(c.attr<double>("forget_bias")),
                       .cell_clip = float(c.attr<double>("cell_clip")),
                       .use_peephole = c.attr<bool>("use_peephole")};
    return result<std::unique_ptr<kernel>>(std::make_unique<cuda_kernel>(
        d, [o, name = c.node.name](gpu_context& g, inputs in, kernel_context& ctx) -> status {
          std::vector<tensor> out(7);
          RUNNEL_RETURN_IF_ERROR(lstm_block_cell_cuda(g, in, o, out, name));
          for (int k = 0; k < 7; ++k)
            ctx.set_output(k, std::move(out[size_t(k)]));
          return {};
        }));
  });
  t.emplace("LSTMBlockCellGrad", [](const kernel_construction& c, cuda_device& d) {
    return result<std::unique_ptr<kernel>>(std::make_unique<cuda_kernel>(
        d, [peephole = c.attr<bool>("use_peephole"), name = c.node.name](
               gpu_context& g, inputs in, kernel_context& ctx) -> status {
          std::vector<tensor> out(5);
          RUNNEL_RETURN_IF_ERROR(lstm_block_cell_grad_cuda(g, in, peephole, out, name));
          for (int k = 0; k < 5; ++k)
            ctx.set_output(k, std::move(out[size_t(k)]));
          return {};
        }));
  });
  t.emplace("BlockLSTM", [](const kernel_construction& c, cuda_device& d) {
    gpu_lstm_options o{.forget_bias = float(c.attr<double>("forget_bias")),
                       .cell_clip = float(c.attr<double>("cell_clip")),
                       .use_peephole = c.attr<bool>("use_peephole")};
    return result<std::unique_ptr<kernel>>(std::make_unique<cuda_kernel>(
        d,
        [o, name = c.node.name](gpu_context& g, inputs in, kernel_context& ctx) -> status {
          std::vector<tensor> out(7);
          RUNNEL_RETURN_IF_ERROR(block_lstm_cuda(g, in, o, out, name));
          for (int k = 0; k < 7; ++k)
            ctx.set_output(k, std::move(out[size_t(k)]));
          return {};
        },
        std::vector<slot_memory>{slot_memory::host})); // seq_len_max on the host
  });
  t.emplace("BlockLSTMGrad", [](const kernel_construction& c, cuda_device& d) {
    return result<std::unique_ptr<kernel>>(std::make_unique<cuda_kernel>(
        d,
        [peephole = c.attr<bool>("use_peephole"), name = c.node.name](
            gpu_context& g, inputs in, kernel_context& ctx) -> status {
          std::vector<tensor> out(8);
          RUNNEL_RETURN_IF_ERROR(block_lstm_grad_cuda(g, in, peephole, out, name));
          for (int k = 0; k < 8; ++k)
            ctx.set_output(k, std::move(out[size_t(k)]));
          return {};
        },
        std::vector<slot_memory>{slot_memory::host}));
  });
}

} // namespace runnel
