#pragma once
// One GPU as the runtime sees it: its memory, the copies of its stream group and its kernels.
// The runtime's GPU device (actors/) is written against this interface only:
//   - cuda_accelerator (ops/cuda/): a real GPU — kernels enqueued on the compute stream, a node
//     done when its event is (a polling thread), copies on the copy streams;
//   - simulated_accelerator (ops/gpu/simulated_gpu.hpp): host memory labelled as device memory,
//     a thread per stream, the CPU kernels as its kernels. It lets the tests drive placement,
//     transfers, memory spaces, the allocator and asynchronous completion on any machine
//     (runtime_options::simulated_gpus).
//
//   auto dev = acc.copy_to_device(host, "x", [](status st, tensor on_gpu) { ... });

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runnel/ops/gpu/bfc_allocator.hpp"
#include "runnel/ops/gpu/gpu_info.hpp"
#include "runnel/ops/kernel/kernel.hpp"

namespace runnel {

/// What the cost model needs to know of a GPU, measured on first use.
struct gpu_throughput {
  double flops_per_s = 0;           ///< a float32 matrix product's rate
  double bytes_per_s = 0;           ///< device memory copy bandwidth
  double host_link_bytes_per_s = 0; ///< host-to-device copies (PCIe, NVLink-C2C)
};

class accelerator {
public:
  virtual ~accelerator() = default;
  /// The GPU's id among this process's GPUs (the N of /device:GPU:N).
  virtual int id() const = 0;
  /// "CUDA" or "simulated", for messages and docs.
  virtual std::string kind() const = 0;
  /// A kernel computing `c.node` on this GPU; asynchronous: it completes when the device has.
  /// Only ops in gpu_kernel_ops() are asked for. Inputs in host memory (feeds, constants, values
  /// from a CPU) are copied to the device first.
  virtual result<std::unique_ptr<kernel>> make_kernel(const kernel_construction& c) = 0;
  /// Copies a host tensor into this GPU's memory (host-to-device stream); `done` gets the device
  /// tensor once the copy has finished. Running out of memory names `node`.
  virtual void copy_to_device(tensor host, const std::string& node,
                              std::function<void(status, tensor)> done) = 0;
  /// Copies a tensor of this GPU's memory to the host (device-to-host stream) after the compute
  /// work that produced it; `done` gets the host tensor.
  virtual void copy_to_host(tensor device, std::function<void(status, tensor)> done) = 0;
  /// A copy of a host tensor in this GPU's memory, for kernels enqueued from now on (the copy is
  /// ordered before them); for values used many times, such as the constants a kernel is bound to.
  virtual result<tensor> upload(const tensor& host, const std::string& node) = 0;
  /// Bytes moved so far: host to device, device to host, and device to device (within this GPU
  /// or from another GPU of the process).
  virtual transfer_stats transfers() const = 0;
  /// Copies a tensor of this GPU's memory to the host now, waiting; the work that produced it
  /// must have completed (the runtime calls it when a finished node's output is fetched or sent
  /// to another device).
  virtual result<tensor> read_to_host(const tensor& device) = 0;
  virtual bfc_stats memory_stats() const = 0;
  /// Starts a new peak of memory_stats() from what is in use now.
  virtual void reset_memory_peak() = 0;
  /// Runs a short benchmark (a 2048² MatMul, 64 MiB copies; tens of milliseconds).
  virtual gpu_throughput measure() = 0;
  /// Returns once all work enqueued so far has run and its completions have been called (the
  /// runtime calls it before its actors stop, so no completion outlives its kernel).
  virtual void wait_idle() = 0;
  /// Waits for the work enqueued so far. A kernel that failed while running, after its node
  /// had completed (stream-ordered GPUs complete nodes when enqueued), is reported here: a
  /// session calls it at the end of each step that ran on this GPU, as TensorFlow's does.
  virtual status synchronize() { return {}; }
};

/// One op with GPU kernels: its name, the type attribute its dtypes are read from, and them.
struct gpu_op {
  const char* op;
  const char* type_attr;
  std::vector<dtype> types;
};
/// The ops that have GPU kernels (on every accelerator). Everything else stays on a CPU: the
/// placer sees no GPU kernel, and transfers are inserted around it.
const std::vector<gpu_op>& gpu_kernel_ops();
/// Registers, for each of gpu_kernel_ops(), a GPU kernel that the node's accelerator builds
/// (kernel_construction::gpu).
void register_gpu_kernels(kernel_registry& reg);

} // namespace runnel
