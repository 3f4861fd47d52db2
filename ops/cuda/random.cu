// RandomUniform on the GPU. Counter-based: element i of a run's output is a hash of (the op's
// key from its seeds, the run's number, i), so every thread draws its own number with no state
// to carry, and the same seeds give the same sequence over runs, as on the CPU. The numbers
// differ from the CPU kernel's (std::mt19937_64, drawn one after another), as TensorFlow's GPU
// and CPU streams differ.
#include "runnel/ops/cuda/dispatch.hpp"
#include "runnel/ops/cuda/kernels.hpp"

namespace runnel {
namespace {

/// SplitMix64's finaliser: a bijection of 64-bit words that mixes every input bit into every
/// output bit.
__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t stream) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    uint64_t bits = mix64(stream + mix64(uint64_t(i) + 0x9E3779B97F4A7C15ull));
    if constexpr (sizeof(T) == 8)
      out[i] = T(double(bits >> 11) * 0x1.0p-53); // 53 bits: [0, 1)
    else
      out[i] = T(float(bits >> 40) * 0x1.0p-24f); // 24 bits: [0, 1)
  }
}

} // namespace

status random_uniform_cuda(gpu_context& gpu, dtype t, const shape& s, uint64_t key, uint64_t run,
                           tensor* out, const std::string& node) {
  std::string where = "node '" + node + "' (op RandomUniform)";
  if (t != dtype::f32 && t != dtype::f64)
    return unimplemented(where + ": no GPU kernel for " + std::string(name(t)));
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(t, s, node));
  int64_t n = out->num_elements();
  if (n == 0)
    return {};
  uint64_t stream = mix64(key ^ mix64(run));
  int blocks = int(std::min<int64_t>((n + 255) / 256, 65535 * 4));
  if (t == dtype::f64)
    uniform_kernel<double><<<blocks, 256, 0, gpu.compute()>>>(out->data<double>(), n, stream);
  else
    uniform_kernel<float><<<blocks, 256, 0, gpu.compute()>>>(out->data<float>(), n, stream);
  return cuda_status(cudaGetLastError(), where);
}

} // namespace runnel
