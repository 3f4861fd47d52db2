#include "runnel/ops/gpu/gpu_info.hpp"

#if RUNNEL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace runnel {
namespace {

gpu_discovery discover() {
  gpu_discovery d;
#if RUNNEL_HAVE_CUDA
  d.built_with_cuda = true;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    d.why_none = std::string("the CUDA runtime says: ") + cudaGetErrorString(e);
    return d;
  }
  if (count == 0) {
    d.why_none = "the CUDA driver sees no GPU";
    return d;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess)
      continue;
    gpu_properties g;
    g.id = i;
    g.name = p.name;
    g.total_memory = p.totalGlobalMem;
    g.compute_major = p.major;
    g.compute_minor = p.minor;
    g.multiprocessors = p.multiProcessorCount;
    size_t free_bytes = 0, total = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total) == cudaSuccess)
      g.free_memory = free_bytes;
    d.gpus.push_back(std::move(g));
  }
  if (d.gpus.empty())
    d.why_none = "no GPU answered cudaGetDeviceProperties";
#else
  d.why_none = "this build has no CUDA kernels (configured with RUNNEL_CUDA=OFF, or the CUDA "
               "toolkit was not found)";
#endif
  return d;
}

} // namespace

const gpu_discovery& discover_gpus() {
  static const gpu_discovery found = discover();
  return found;
}

std::vector<gpu_properties> visible_gpus(const gpu_discovery& found, const std::vector<int>* visible,
                                         std::string* error) {
  if (!visible)
    return found.gpus;
  std::vector<gpu_properties> out;
  for (int id : *visible) {
    bool known = false;
    for (auto& g : found.gpus)
      if (g.id == id) {
        out.push_back(g);
        known = true;
      }
    if (!known && error)
      *error = "visible_gpus names GPU " + std::to_string(id) + ", but this machine has " +
               std::to_string(found.gpus.size()) + " GPU(s)" +
               (found.gpus.empty() ? " (" + found.why_none + ")" : "");
  }
  return out;
}

} // namespace runnel
