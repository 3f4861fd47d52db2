#pragma once
// The accelerator of a real GPU (ops/gpu/accelerator.hpp): the gpu_context's streams and
// allocator, the CUDA kernels of gpu_kernel_ops(), and a polling thread that completes a node
// when the event recorded after its kernel is reached, unless the GPU is stream-ordered (the
// runtime's only one), where nodes complete when enqueued (cuda_device::finish).
#include <map>
#include <string>
#include <vector>

#include "runnel/ops/gpu/accelerator.hpp"

namespace runnel {

/// /device:GPU:`index`, driving CUDA device `cuda_device`. `stream_ordered`: its nodes complete
/// when their work is enqueued, not when it has run (cuda_device::finish); only for a runtime's
/// only GPU, whose values no other stream reads.
result<std::unique_ptr<accelerator>> make_cuda_accelerator(int index, int cuda_device,
                                                           size_t memory_limit,
                                                           bool stream_ordered);
/// The ops with a CUDA kernel (the factories' table, ops/cuda/cuda_kernel.hpp).
std::vector<std::string> cuda_kernel_op_names();
/// Op name -> the family that registers its CUDA kernel (its RUNNEL_CUDA_KERNEL_FAMILY line in
/// ops/cuda/cuda_kernels_*.cpp).
std::map<std::string, std::string> builtin_cuda_kernel_families();

} // namespace runnel
