#pragma once
// One GPU as the kernels see it: a stream group (compute, host-to-device, device-to-host,
// device-to-device, TensorFlow's design), cuBLAS and cuDNN handles bound to the compute stream,
// and a BFC allocator over cudaMalloc within a memory limit. CUDA code only: this header brings
// the CUDA runtime's types.
//
//   auto gpu = gpu_context::create(0).value();
//   tensor x = gpu->to_device(host_tensor).value();         // async on the h2d stream
//   tensor y;
//   RUNNEL_RETURN_IF_ERROR(unary_cuda(*gpu, unary_op::Relu, x, &y, "relu"));  // compute stream
//   tensor back = gpu->to_host(y).value();                  // d2h, waits for the result
//
// Ordering: a copy onto the device waits for the compute work enqueued before it (its
// destination may be memory those kernels still read, freed to the allocator once enqueued) and
// records an event the compute stream waits on; a copy back waits on an event recorded after the
// compute work. All kernels run on the one compute stream, so memory freed by one node's kernels
// is safely reused by the next. Nothing blocks the host except to_host and synchronize.

#include "runnel/ops/cuda/cublas_api.hpp"
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runnel/ops/gpu/bfc_allocator.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel {

/// OK, or an internal error naming `what` and CUDA's message (the device stays usable for
/// errors that are not sticky).
status cuda_status(cudaError_t e, const std::string& what);
status cublas_status(cublasStatus_t e, const std::string& what);
status cudnn_status(cudnnStatus_t e, const std::string& what);

/// Seconds per call of `f` (work it enqueues on `stream`), timed with CUDA events over `runs`
/// calls after one warm-up call. For benchmarks and the cost model's measurements.
double stream_seconds(cudaStream_t stream, const std::function<void()>& f, int runs);

class gpu_context {
public:
  /// GPU `device` with an allocator of at most `memory_limit` bytes (0: 90% of its free
  /// memory). No GPU: an `unavailable` error saying why.
  static result<std::unique_ptr<gpu_context>> create(int device, size_t memory_limit = 0);
  ~gpu_context();
  gpu_context(const gpu_context&) = delete;
  gpu_context& operator=(const gpu_context&) = delete;

  int device() const { return device_; }
  cudaStream_t compute() const { return compute_; }
  cudaStream_t host_to_device() const { return h2d_; }
  cudaStream_t device_to_host() const { return d2h_; }
  cudaStream_t device_to_device() const { return d2d_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  bfc_allocator& allocator() { return *allocator_; }

  /// An uninitialised tensor in this GPU's memory, given back to the allocator with its last
  /// reference; running out is `resource_exhausted` naming `node`.
  result<tensor> allocate(dtype t, const shape& s, const std::string& node = {});
  /// Copies a host tensor to the device on the h2d stream; compute work enqueued afterwards
  /// waits for it. Host memory is staged through a pinned buffer (from a caching allocator).
  result<tensor> to_device(const tensor& host, const std::string& node = {});
  /// Copies a device tensor back on the d2h stream after the compute work enqueued so far,
  /// and waits for it.
  result<tensor> to_host(const tensor& device);
  /// A copy of a device tensor in new device memory, on the compute stream (no host involved).
  result<tensor> copy_on_device(const tensor& device, const std::string& node = {});
  /// Copies `bytes` between device buffers on the compute stream (D2D, or peer to peer between
  /// two GPUs of the process).
  status copy_device_bytes(void* dst, const void* src, size_t bytes);
  /// Waits for every stream; reports an asynchronous kernel error.
  status synchronize();

  /// Bytes copied so far: host to device, device to host, device to device.
  int64_t bytes_to_device() const { return h2d_bytes_.load(std::memory_order_relaxed); }
  int64_t bytes_to_host() const { return d2h_bytes_.load(std::memory_order_relaxed); }
  int64_t bytes_on_device() const { return d2d_bytes_.load(std::memory_order_relaxed); }

  /// A plan (cuDNN descriptors and chosen algorithms, say) cached under `key` for the life of
  /// the context; made by `make` on first use. An error is not cached.
  result<std::shared_ptr<void>> cached_plan(const std::string& key,
                                            const std::function<result<std::shared_ptr<void>>()>& make);
  /// Held while a node's work is enqueued: the cuBLAS and cuDNN handles (and the plan search)
  /// are used by one thread at a time. Enqueueing is short; the kernels run asynchronously.
  std::mutex& launch_mutex() { return launch_mu_; }

  /// A node's many small launches enqueued as one, with launch_mutex() held. `enqueue(stream)`
  /// launches on `stream` (and through cublas(), pointed at that stream meanwhile) and does
  /// nothing else a stream capture forbids (no allocation, no synchronization). The first call
  /// of a `family` with given `pointers` captures the launches as a CUDA graph on a private stream
  /// and launches the graph on the compute stream; a later call with the same family and
  /// pointers replays it. So `family` must name every size and option the launches depend on,
  /// and `pointers` every device address they read or write (graph_launch.cpp). A family whose
  /// calls keep bringing new pointers is given up (launched directly), as is every family when a
  /// capture fails or RUNNEL_CUDA_GRAPHS=off.
  status launch_as_graph(const std::string& family, const std::vector<const void*>& pointers,
                         const std::function<status(cudaStream_t)>& enqueue);
  /// A node's device buffers that keep their addresses from call to call, so that the node's
  /// graph replays (launch_as_graph keys graphs by address): see steady_inputs and
  /// steady_outputs. One per node, kept with the node's name by steady_buffers_of.
  struct steady_buffers {
    std::vector<const void*> seen; ///< each input's address at the first call
    std::vector<tensor> copies;    ///< per input that moved once: where it is copied from then on
    /// Up to three sets of output buffers, each handed out again once nobody else holds any of
    /// it (the last step's consumers may let go a little after the next step starts).
    std::vector<std::vector<tensor>> output_sets;
  };
  steady_buffers& steady_buffers_of(const std::string& node);
  /// `in` with each device input that ever moved from its first call's address replaced by a
  /// copy in a buffer of the node's own (one device-to-device copy on the compute stream).
  result<std::vector<tensor>> steady_inputs(steady_buffers& b, std::span<const tensor> in,
                                            const std::string& node);
  /// The node's output buffers, one per (type, shape) of `wanted`: the first set it had before
  /// of which nobody else holds any buffer any more, else a new set it keeps (the oldest of
  /// three is let go).
  result<std::vector<tensor>> steady_outputs(steady_buffers& b,
                                             std::span<const std::pair<dtype, shape>> wanted,
                                             const std::string& node);
  /// A scratch buffer of at least `bytes` that keeps its address while big enough, shared by
  /// every node of the context: the compute stream runs one node's launches after another's, so
  /// one buffer serves them all (a graph bakes its scratch's address in).
  result<void*> steady_scratch(size_t bytes, const std::string& node);
  struct graph_counts {
    int64_t captured = 0, replayed = 0, direct = 0;
  };
  /// How launch_as_graph's calls went so far, over every GPU context of the process.
  static graph_counts graph_launches();

private:
  explicit gpu_context(int device); // in gpu_context.cpp, where graph_cache is complete
  /// Makes stream `s` wait for the work enqueued on the compute stream so far.
  status order_after_compute(cudaStream_t s);
  /// Frees pinned staging buffers whose copies are done (all of them, waiting, with `wait`).
  void reap_staging(bool wait);
  int device_;
  std::atomic<int64_t> h2d_bytes_{0}, d2h_bytes_{0}, d2d_bytes_{0};
  std::mutex launch_mu_;
  std::mutex plans_mu_;
  std::unordered_map<std::string, std::shared_ptr<void>> plans_;
  std::mutex staging_mu_;
  std::vector<std::pair<cudaEvent_t, void*>> staging_;
  cudaStream_t compute_ = nullptr, h2d_ = nullptr, d2h_ = nullptr, d2d_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  tensor cublas_workspace_; ///< from allocator_, so that it counts against the limit and the peak
  cudnnHandle_t cudnn_ = nullptr;
  std::unique_ptr<bfc_allocator> allocator_;
  std::unique_ptr<bfc_allocator> pinned_; ///< staging buffers (cudaMallocHost regions)
  struct graph_cache;
  std::unique_ptr<graph_cache> graphs_; ///< launch_as_graph's graphs (graph_launch.cpp)
  graph_cache& graphs();                ///< made on first use
};

} // namespace runnel
