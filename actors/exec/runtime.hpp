#pragma once
// The runtime: the actor system and one device actor per local device.
//
//   runtime rt;                                  // one CPU device, one scheduler thread per core
//   runtime rt2(runtime_options{.cpu_devices = 4});
//   for (auto& d : rt.devices()) std::cout << d << "\n";
//       // /job:localhost/replica:0/task:0/device:cpu:0
//
// A runtime owns its device actors and their resources (variables): state lives as long as the
// runtime, across sessions. Sessions borrow the runtime; a runtime destroyed while sessions are
// open closes them first (their runs then fail with `cancelled`). CAF stays behind this header.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runnel/ops/gpu/bfc_allocator.hpp"
#include "runnel/ops/gpu/gpu_info.hpp"
#include "runnel/placement/cost_model.hpp"

namespace runnel {

struct runtime_options {
  /// Virtual CPU devices (cpu:0 .. cpu:N-1), each its own device actor.
  int cpu_devices = 1;
  /// Actor scheduler threads; 0 = one per core.
  int scheduler_threads = 0;
  /// Intra-op threads per CPU device for large kernels; 0 = one per core (with exclusive device
  /// budgets: the budget less the thread running the kernel).
  int intra_op_threads = 0;
  /// Exclusive compute threads per device: each device runs its expensive kernels on threads of
  /// its own, so virtual devices compete for cores like real ones. 0 = automatic (with several
  /// CPU devices, cores / cpu_devices each, at least 1; a single device runs kernels on the actor
  /// scheduler's threads); -1 = never.
  int device_threads = 0;
  /// Throughput of each CPU device for the cost-model placer. Unset: measured by a quick
  /// microbenchmark (a matrix product and a copy, ~20 ms) the first time a placement needs it.
  std::optional<device_params> cpu_params;
  /// Job and task of this process in device names.
  std::string job = "localhost";
  int task = 0;
  /// The GPUs this runtime may use, by CUDA id (unset: all; empty: none).
  std::optional<std::vector<int>> visible_gpus;
  /// The most device memory each GPU's allocator takes (0: 90% of its free memory at start;
  /// 1 GiB for a simulated GPU).
  size_t gpu_memory_limit = 0;
  /// GPUs made of host memory and threads (ops/gpu/simulated_gpu.hpp), after the real ones:
  /// GPU placement, transfers and device memory on any machine, for tests and trials.
  int simulated_gpus = 0;
};

class runtime {
public:
  explicit runtime(runtime_options options = {});
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Full names of the local devices, e.g. "/job:localhost/replica:0/task:0/device:cpu:0".
  std::vector<std::string> devices() const;
  /// The GPUs found and visible to this runtime (docs/gpu.md says what runs on them).
  const std::vector<gpu_properties>& gpus() const;
  /// Why the runtime has no GPU device ("" when it has one, real or simulated).
  const std::string& no_gpu_reason() const;
  /// Device memory statistics of /device:GPU:`id` (an error when there is no such GPU).
  result<bfc_stats> gpu_memory(int id) const;
  /// Starts a new peak of gpu_memory(id) from the bytes in use now: the peak of the steps that
  /// follow (an error when there is no such GPU).
  status reset_gpu_memory_peak(int id);
  /// Bytes GPU `id` has copied in and out so far (real GPUs; a simulated one counts nothing).
  result<transfer_stats> gpu_transfers(int id) const;
  const runtime_options& options() const;
  /// The CPU devices' throughput for the cost model: runtime_options::cpu_params, or measured
  /// once (on first use) with each device's compute budget.
  const device_params& cpu_params() const;
  /// Threads of each device's exclusive compute budget, as resolved from
  /// runtime_options::device_threads; 0 when kernels run on the actor scheduler's threads.
  int device_threads() const;

  struct impl;
  impl& internals() { return *impl_; }

private:
  std::unique_ptr<impl> impl_;
};

} // namespace runnel
