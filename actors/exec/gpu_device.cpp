// GPU devices of the runtime: the CUDA accelerator when the build has the kernels, and the
// _Send/_Recv kernels of GPU devices, which move tensors between host and device memory.
#include "runnel/actors/exec/internal.hpp"

#if RUNNEL_HAVE_CUDA
#include "runnel/ops/cuda/cuda_accelerator.hpp"
#endif

namespace runnel {

result<std::unique_ptr<accelerator>> make_gpu_accelerator(int index, int cuda_device,
                                                          size_t memory_limit, bool stream_ordered) {
#if RUNNEL_HAVE_CUDA
  return make_cuda_accelerator(index, cuda_device, memory_limit, stream_ordered);
#else
  (void)index;
  (void)stream_ordered;
  (void)memory_limit;
  return unimplemented("GPU " + std::to_string(cuda_device) +
                       ": this build has no CUDA kernels (RUNNEL_CUDA=OFF or no toolkit)");
#endif
}

} // namespace runnel
