#include "runnel/ops/cpu/builtin_kernels.hpp"
#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {

/// EmulatedCompute's kernel (ops/cpu/emulation.cpp): used only here, so not in kernels.hpp.
void register_emulation_kernels(kernel_registry& reg);

void register_builtin_kernels(kernel_registry& reg) {
  register_elementwise_kernels(reg);
  register_unary_kernels(reg);
  register_matmul_kernels(reg);
  register_reduction_kernels(reg);
  register_array_kernels(reg);
  register_nn_kernels(reg);
  register_random_kernels(reg);
  register_state_kernels(reg);
  register_grad_support_kernels(reg);
  register_training_kernels(reg);
  register_conv_kernels(reg);
  register_fused_kernels(reg); // wraps MatMul and Conv2D
  register_fused_elementwise_kernels(reg);
  register_transform_kernels(reg);
  register_linalg_kernels(reg);
  register_queue_kernels(reg);
  register_accumulator_kernels(reg);
  register_control_flow_kernels(reg);
  register_tensor_array_kernels(reg);
  register_sparse_kernels(reg);
  register_candidate_sampling_kernels(reg);
  register_word2vec_kernels(reg);
  register_emulation_kernels(reg);
  register_batch_norm_kernels(reg);
  register_lstm_block_kernels(reg);
  register_block_lstm_kernels(reg);
  register_reduced_precision_kernels(reg); // last: it wraps the float32 kernels above
}

const kernel_registry& builtin_kernels() {
  static const kernel_registry* reg = [] {
    auto* r = new kernel_registry;
    register_builtin_kernels(*r);
    return r;
  }();
  return *reg;
}

} // namespace runnel
