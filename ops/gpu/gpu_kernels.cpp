// The ops with GPU kernels, and their registration: each GPU kernel is built by the node's
// accelerator (CUDA or simulated), so placement sees one list whichever runs it.
#include "runnel/ops/gpu/accelerator.hpp"

#include "runnel/ops/core/binary_ops.hpp"
#include "runnel/ops/core/unary_ops.hpp"

namespace runnel {

const std::vector<gpu_op>& gpu_kernel_ops() {
  static const std::vector<gpu_op> ops = [] {
    const std::vector<dtype> floats{dtype::f16, dtype::bf16, dtype::f32, dtype::f64};
    const std::vector<dtype> numbers{dtype::f16, dtype::bf16, dtype::f32,
                                     dtype::f64, dtype::i32,  dtype::i64};
    const std::vector<dtype> cudnn{dtype::f16, dtype::bf16, dtype::f32};
    const std::vector<dtype> reals{dtype::f32, dtype::f64};
    std::vector<gpu_op> v;
    // math
    for (auto& b : binary_ops) // the rows of ops/core/binary_ops.hpp with CUDA kernels
      if (b.devices != binary_devices::cpu)
        v.push_back({b.name, "T", gpu_floats_only(b.kind, b.devices) ? floats : numbers});
    for (auto op : {"AddN", "Select"})
      v.push_back({op, "T", numbers});
    for (auto op : {"MatMul", "Sum", "Mean", "Max", "Min"})
      v.push_back({op, "T", floats});
    for (auto& u : unary_ops) // every row of ops/core/unary_ops.hpp, for floats
      v.push_back({u.name, "T", floats});
    v.push_back({"_UnaryGrad", "T", floats});
    v.push_back({"Cast", "DstT", numbers});
    // random: the GPU's own counter-based stream (ops/cuda/random.cu), not the CPU's numbers
    v.push_back({"RandomUniform", "dtype", reals});
    // nn
    for (auto op : {"BiasAdd", "BiasAddGrad", "Softmax", "SparseSoftmaxCrossEntropyWithLogits"})
      v.push_back({op, "T", floats});
    for (auto op : {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPool", "AvgPool",
                    "MaxPoolGrad", "AvgPoolGrad"})
      v.push_back({op, "T", cudnn});
    for (auto op : {"LSTMBlockCell", "LSTMBlockCellGrad", "BlockLSTM", "BlockLSTMGrad"})
      v.push_back({op, "T", {dtype::f32}});
    // array: ops that only read shapes or pass buffers along run for any dtype, leaving GPU
    // values in place; shapes come out in host memory.
    for (auto op :
         {"Identity", "StopGradient", "Reshape", "ExpandDims", "Squeeze", "Shape", "Size", "Rank"})
      v.push_back({op, "T", {}});
    // Float constants are copied to the device once, then reused; others (shapes, axes,
    // indices) stay in host memory, where the kernels that take them read them (TensorFlow's
    // HostMemory arguments). Placement leaves such a constant on a CPU unless it is colocated
    // with GPU nodes (placement/placer.cpp).
    v.push_back({"Const", "dtype", {}});
    for (auto op : {"ZerosLike", "OnesLike", "Fill", "UnsortedSegmentSum"})
      v.push_back({op, "T", numbers});
    v.push_back({"GatherV2", "Tparams", numbers});
    // state: float variables live in GPU memory with their updates (integer counters such as
    // global_step stay on a CPU)
    v.push_back({"VariableV2", "dtype", floats});
    for (auto op :
         {"Assign", "AssignAdd", "AssignSub", "ScatterAdd", "ScatterSub", "ScatterUpdate"})
      v.push_back({op, "T", floats});
    for (auto op :
         {"ApplyGradientDescent", "ApplyMomentum", "ApplyAdagrad", "ApplyRMSProp", "ApplyAdam",
          "SparseApplyGradientDescent", "SparseApplyMomentum", "SparseApplyAdagrad",
          "SparseApplyRMSProp", "SparseApplyAdam", "_MultiApplyAdam"})
      v.push_back({op, "T", reals});
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
