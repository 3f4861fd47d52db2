// The ops with GPU kernels, and their registration: each GPU kernel is built by the node's
// accelerator (CUDA or simulated), so placement sees one list whichever runs it.
#include "runnel/ops/gpu/accelerator.hpp"

namespace runnel {

const std::vector<gpu_op>& gpu_kernel_ops() {
  static const std::vector<gpu_op> ops = [] {
    const std::vector<dtype> floats{dtype::f16, dtype::bf16, dtype::f32, dtype::f64};
    const std::vector<dtype> numbers{dtype::f16, dtype::bf16, dtype::f32,
                                     dtype::f64, dtype::i32,  dtype::i64};
    std::vector<gpu_op> v;
    for (auto op : {"Add", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference", "Greater",
                    "Less", "Equal"})
      v.push_back({op, "T", numbers});
    for (auto op : {"Div", "ReluGrad", "SigmoidGrad", "TanhGrad", "Neg", "Exp", "Log", "Sqrt",
                    "Square", "Tanh", "Sigmoid", "Relu", "Abs", "Rsqrt", "Reciprocal", "MatMul",
                    "BiasAdd", "BiasAddGrad", "Softmax", "SparseSoftmaxCrossEntropyWithLogits",
                    "Sum", "Mean", "Max", "Min"})
      v.push_back({op, "T", floats});
    v.push_back({"Conv2D", "T", {dtype::f16, dtype::bf16, dtype::f32}}); // forward only
    v.push_back({"MaxPool", "T", {dtype::f16, dtype::bf16, dtype::f32}});
    v.push_back({"Cast", "DstT", numbers});
    // Floats only: integer constants (shapes, axes, indices) stay in host memory, where the
    // kernels that take them read them (TensorFlow's HostMemory arguments).
    v.push_back({"Const", "dtype", floats}); // copied to the device once, then reused
    return v;
  }();
  return ops;
}

void register_gpu_kernels(kernel_registry& reg) {
  for (auto& g : gpu_kernel_ops())
    reg.add(
        g.op, device_type::gpu, g.types,
        [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
          if (!c.gpu)
            return failed_precondition("node '" + c.node.name + "' (op " + c.node.op +
                                       "): a GPU kernel was asked for on a device with no GPU");
          return c.gpu->make_kernel(c);
        },
        g.type_attr);
}

} // namespace runnel
