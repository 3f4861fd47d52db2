// CUDA kernels of the math family: element-wise ops, Cast, AddN, Select, reductions, MatMul.
#include "runnel/ops/cuda/cuda_kernel.hpp"
#include "runnel/ops/cuda/kernels.hpp"

namespace runnel {

void add_math_cuda_kernels(cuda_kernel_table& t) {
  using inputs = cuda_kernel::inputs;
  static const std::vector<std::pair<const char*, gpu_binary>> binaries{
      {"Add", gpu_binary::add},           {"Sub", gpu_binary::sub},
      {"Mul", gpu_binary::mul},           {"Div", gpu_binary::div},
      {"Maximum", gpu_binary::maximum},   {"Minimum", gpu_binary::minimum},
      {"SquaredDifference", gpu_binary::squared_difference},
      {"ReluGrad", gpu_binary::relu_grad}, {"SigmoidGrad", gpu_binary::sigmoid_grad},
      {"TanhGrad", gpu_binary::tanh_grad}, {"Greater", gpu_binary::greater},
      {"Less", gpu_binary::less},         {"Equal", gpu_binary::equal}};
  for (auto& [op, kind] : binaries)
    t.emplace(op, [kind = kind](const kernel_construction& c, cuda_device& d) {
      return one_output(d, [kind, name = c.node.name](gpu_context& g, inputs in, tensor* out) {
        return binary_cuda(g, kind, in[0], in[1], out, name);
      });
    });
  static const std::vector<std::pair<const char*, gpu_unary>> unaries{
      {"Neg", gpu_unary::neg},         {"Exp", gpu_unary::exp},       {"Log", gpu_unary::log},
      {"Sqrt", gpu_unary::sqrt},       {"Square", gpu_unary::square}, {"Tanh", gpu_unary::tanh},
      {"Sigmoid", gpu_unary::sigmoid}, {"Relu", gpu_unary::relu},     {"Abs", gpu_unary::abs},
      {"Rsqrt", gpu_unary::rsqrt},     {"Reciprocal", gpu_unary::reciprocal},
      {"Floor", gpu_unary::floor}};
  for (auto& [op, kind] : unaries)
    t.emplace(op, [kind = kind](const kernel_construction& c, cuda_device& d) {
      return one_output(d, [kind, name = c.node.name](gpu_context& g, inputs in, tensor* out) {
        return unary_cuda(g, kind, in[0], out, name);
      });
    });
  static const std::vector<std::pair<const char*, gpu_reduce>> reductions{
      {"Sum", gpu_reduce::sum}, {"Mean", gpu_reduce::mean}, {"Max", gpu_reduce::max},
      {"Min", gpu_reduce::min}};
  for (auto& [op, kind] : reductions)
    t.emplace(op, [kind = kind](const kernel_construction& c, cuda_device& d) {
      return one_output(
          d,
          [kind, keep = c.attr<bool>("keep_dims"), name = c.node.name](gpu_context& g, inputs in,
                                                                      tensor* out) {
            return reduce_cuda(g, kind, in[0], in[1], keep, out, name);
          },
          {slot_memory::device, slot_memory::host}); // the axes are read on the host
    });
  t.emplace("Cast", [](const kernel_construction& c, cuda_device& d) {
    return one_output(d, [to = c.attr<dtype>("DstT"), name = c.node.name](gpu_context& g, inputs in,
                                                                         tensor* out) {
      return cast_cuda(g, in[0], to, out, name);
    });
  });
  t.emplace("AddN", [](const kernel_construction& c, cuda_device& d) {
    return one_output(d, [name = c.node.name](gpu_context& g, inputs in, tensor* out) {
      return add_n_cuda(g, in, out, name);
    });
  });
  t.emplace("Select", [](const kernel_construction& c, cuda_device& d) {
    return one_output(d, [name = c.node.name](gpu_context& g, inputs in, tensor* out) {
      return select_cuda(g, in[0], in[1], in[2], out, name);
    });
  });
  t.emplace("MatMul", [](const kernel_construction& c, cuda_device& d) {
    gpu_matmul_options o{.transpose_a = c.attr<bool>("transpose_a"),
                         .transpose_b = c.attr<bool>("transpose_b")};
    return one_output(d, [o, name = c.node.name](gpu_context& g, inputs in, tensor* out) {
      return matmul_cuda(g, in[0], in[1], o, out, name);
    });
  });
}

} // namespace runnel
