#pragma once
// Which GPUs this process can use. Asked once per process (the CUDA runtime is initialised on
// the first call); a build without CUDA, a machine without a driver or without a GPU all give
// an empty list and say why.
//
//   auto& found = discover_gpus();
//   if (found.gpus.empty()) std::fprintf(stderr, "no GPU: %s\n", found.why_none.c_str());

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace runnel {

struct gpu_properties {
  int id = 0;
  std::string name;          ///< e.g. "NVIDIA H100 80GB HBM3"
  size_t total_memory = 0;   ///< bytes
  size_t free_memory = 0;    ///< bytes, when discovered
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
};

struct gpu_discovery {
  std::vector<gpu_properties> gpus;
  /// Why `gpus` is empty: "this build has no CUDA ...", the CUDA runtime's error, ...
  std::string why_none;
  /// Whether the build has the CUDA kernels (RUNNEL_HAVE_CUDA).
  bool built_with_cuda = false;
};

/// The GPUs of this machine (computed on the first call; thread-safe).
const gpu_discovery& discover_gpus();

/// `found` restricted to the ids in `visible` (all of them when `visible` is null), as the
/// runtime's `visible_gpus` option asks; an id that does not exist is an error message.
std::vector<gpu_properties> visible_gpus(const gpu_discovery& found, const std::vector<int>* visible,
                                         std::string* error);

/// Bytes a GPU has copied: host to device, device to host, device to device (within the GPU,
/// or from another GPU of the process).
struct transfer_stats {
  int64_t host_to_device = 0, device_to_host = 0, device_to_device = 0;
};

} // namespace runnel
