#include "runnel/ops/cuda/gpu_context.hpp"
#include "runnel/ops/cuda/graph_cache.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace runnel {
namespace {

class cuda_sub_allocator : public sub_allocator {
public:
  explicit cuda_sub_allocator(int device) : device_(device) {}
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    if (cudaSetDevice(device_) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError(); // out of memory is not sticky: clear it
      return nullptr;
    }
    return p;
  }
  void free(void* p, size_t) override {
    cudaSetDevice(device_);
    cudaFree(p);
  }

private:
  int device_;
};

/// Page-locked host memory, for the staging buffers of host-to-device copies.
class pinned_sub_allocator : public sub_allocator {
public:
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void free(void* p, size_t) override { cudaFreeHost(p); }
};

} // namespace

status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess)
    return {};
  return internal_error(what + ": CUDA error " + std::to_string(int(e)) + " (" +
                        cudaGetErrorName(e) + "): " + cudaGetErrorString(e));
}

status cublas_status(cublasStatus_t e, const std::string& what) {
  if (e == CUBLAS_STATUS_SUCCESS)
    return {};
  // A status comes from a handle, so cuBLAS is loaded by now.
  return internal_error(what + ": cuBLAS error " + std::to_string(int(e)) + " (" +
                        cublas().status_string(e) + ")");
}

status cudnn_status(cudnnStatus_t e, const std::string& what) {
  if (e == CUDNN_STATUS_SUCCESS)
    return {};
  return internal_error(what + ": cuDNN error " + std::to_string(int(e)) + " (" +
                        cudnnGetErrorString(e) + ")");
}

double stream_seconds(cudaStream_t stream, const std::function<void()>& f, int runs) {
  f(); // warm-up
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, stream);
  for (int i = 0; i < runs; ++i)
    f();
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return double(ms) / 1e3 / runs;
}

result<std::unique_ptr<gpu_context>> gpu_context::create(int device, size_t memory_limit) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return unavailable("GPU " + std::to_string(device) + ": no GPU is usable (" +
                       cudaGetErrorString(e) + ")");
  if (device < 0 || device >= count)
    return unavailable("GPU " + std::to_string(device) + ": this machine has " +
                       std::to_string(count) + " GPU(s)");
  std::unique_ptr<gpu_context> g(new gpu_context(device));
  std::string where = "GPU " + std::to_string(device);
  RUNNEL_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device), where + ": cudaSetDevice"));
  for (cudaStream_t* s : {&g->compute_, &g->h2d_, &g->d2h_, &g->d2d_})
    RUNNEL_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking),
                                       where + ": creating a stream"));
  auto api = load_cublas();
  if (!api)
    return api.error().with_context(where);
  RUNNEL_RETURN_IF_ERROR(cublas_status((*api)->create(&g->cublas_), where + ": cublasCreate"));
  RUNNEL_RETURN_IF_ERROR(cublas_status((*api)->set_stream(g->cublas_, g->compute_),
                                       where + ": cublasSetStream"));
  RUNNEL_RETURN_IF_ERROR(cudnn_status(cudnnCreate(&g->cudnn_), where + ": cudnnCreate"));
  RUNNEL_RETURN_IF_ERROR(
      cudnn_status(cudnnSetStream(g->cudnn_, g->compute_), where + ": cudnnSetStream"));
  if (memory_limit == 0) {
    size_t free_bytes = 0, total = 0;
    RUNNEL_RETURN_IF_ERROR(cuda_status(cudaMemGetInfo(&free_bytes, &total), where));
    memory_limit = free_bytes / 10 * 9;
  }
  g->pinned_ = std::make_unique<bfc_allocator>(
      std::make_unique<pinned_sub_allocator>(),
      bfc_options{.memory_limit = size_t(4) << 30, .initial_region_bytes = size_t(16) << 20,
                  .name = "pinned host memory of GPU " + std::to_string(device)});
  g->allocator_ = std::make_unique<bfc_allocator>(
      std::make_unique<cuda_sub_allocator>(device),
      bfc_options{.memory_limit = memory_limit, .initial_region_bytes = size_t(64) << 20,
                  .name = "GPU:" + std::to_string(device)});
  // cuBLAS's workspace from our allocator (as PyTorch gives it from its own), so that the memory
  // limit and the peak count it; the size NVIDIA recommends (32 MiB on Hopper, 4 MiB before), at
  // most an eighth of a small limit. Under 1 MiB cuBLAS keeps allocating its own.
  cudaDeviceProp prop{};
  RUNNEL_RETURN_IF_ERROR(cuda_status(cudaGetDeviceProperties(&prop, device), where));
  int64_t workspace = std::min<int64_t>(prop.major >= 9 ? int64_t(32) << 20 : int64_t(4) << 20,
                                        int64_t(memory_limit / 8));
  if (workspace < (int64_t(1) << 20))
    return g;
  RUNNEL_ASSIGN_OR_RETURN(g->cublas_workspace_,
                          g->allocate(dtype::u8, shape{workspace}, "cuBLAS workspace"));
  RUNNEL_RETURN_IF_ERROR(cublas_status(
      (*api)->set_workspace(g->cublas_, g->cublas_workspace_.raw_data(), size_t(workspace)),
      where + ": cublasSetWorkspace"));
  return g;
}

gpu_context::gpu_context(int device) : device_(device) {}

gpu_context::~gpu_context() {
  cudaSetDevice(device_);
  for (cudaStream_t s : {compute_, h2d_, d2h_, d2d_})
    if (s)
      cudaStreamSynchronize(s);
  reap_staging(true);
  if (graphs_) { // its graphs, and its buffers before the allocator goes
    graphs_->clear();
    if (graphs_->capture)
      cudaStreamDestroy(graphs_->capture);
    graphs_.reset();
  }
  plans_.clear();     // cuDNN descriptors, before the handle goes
  cublas_workspace_ = tensor(); // back to the allocator before it goes
  allocator_.reset(); // its regions go back with cudaFree before the handles go
  pinned_.reset();
  if (cudnn_)
    cudnnDestroy(cudnn_);
  if (cublas_)
    runnel::cublas().destroy(cublas_);
  for (cudaStream_t s : {compute_, h2d_, d2h_, d2d_})
    if (s)
      cudaStreamDestroy(s);
}

result<tensor> gpu_context::allocate(dtype t, const shape& s, const std::string& node) {
  return allocate_device_tensor(*allocator_, t, s, node, device_);
}

result<tensor> gpu_context::to_device(const tensor& host, const std::string& node) {
  if (!host.host_readable())
    return invalid_argument("to_device: the tensor is already in " + host.memory_name());
  RUNNEL_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
  RUNNEL_ASSIGN_OR_RETURN(tensor out, allocate(host.type(), host.shape(), node));
  size_t bytes = host.bytes();
  if (bytes) {
    h2d_bytes_.fetch_add(int64_t(bytes), std::memory_order_relaxed);
    // Staged through pinned memory, so the copy is truly asynchronous (and the caller's
    // buffer may be reused at once).
    reap_staging(false);
    // Pinned buffers come from a caching allocator: cudaMallocHost per copy costs more than
    // most copies.
    RUNNEL_ASSIGN_OR_RETURN(void* pinned, pinned_->allocate(bytes, node));
    std::memcpy(pinned, host.raw_data(), bytes);
    // `out` may reuse memory that kernels enqueued on the compute stream still read (freed to
    // the allocator once enqueued): the copy waits for them, as TensorFlow's copies do.
    status st = order_after_compute(h2d_);
    if (st.ok())
      st = cuda_status(
        cudaMemcpyAsync(out.raw_data(), pinned, bytes, cudaMemcpyHostToDevice, h2d_),
        "copy to GPU");
    cudaEvent_t copied = nullptr;
    if (st.ok())
      st = cuda_status(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), "event");
    if (st.ok()) {
      cudaEventRecord(copied, h2d_);
      cudaStreamWaitEvent(compute_, copied, 0);
      // The pinned buffer is freed once the event says the copy is done (host callbacks may
      // not call CUDA, so it is reaped on later calls).
      std::lock_guard lock(staging_mu_);
      staging_.push_back({copied, pinned});
    } else {
      cudaStreamSynchronize(h2d_);
      (void)pinned_->deallocate(pinned);
    }
    RUNNEL_RETURN_IF_ERROR(st);
  }
  return out;
}

status gpu_context::order_after_compute(cudaStream_t s) {
  cudaEvent_t computed;
  RUNNEL_RETURN_IF_ERROR(
      cuda_status(cudaEventCreateWithFlags(&computed, cudaEventDisableTiming), "event"));
  cudaEventRecord(computed, compute_);
  cudaError_t e = cudaStreamWaitEvent(s, computed, 0);
  cudaEventDestroy(computed); // released once the wait has happened
  return cuda_status(e, "ordering a copy after the compute stream");
}

result<tensor> gpu_context::to_host(const tensor& device) {
  if (device.host_readable())
    return device;
  RUNNEL_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
  tensor out(device.type(), device.shape());
  if (out.bytes()) {
    d2h_bytes_.fetch_add(int64_t(out.bytes()), std::memory_order_relaxed);
    RUNNEL_RETURN_IF_ERROR(order_after_compute(d2h_));
    RUNNEL_RETURN_IF_ERROR(cuda_status(
        cudaMemcpyAsync(out.raw_data(), device.raw_data(), out.bytes(), cudaMemcpyDeviceToHost,
                        d2h_),
        "copy from GPU"));
    RUNNEL_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(d2h_), "copy from GPU"));
  }
  return out;
}

result<tensor> gpu_context::copy_on_device(const tensor& device, const std::string& node) {
  if (device.memory() != memory_space::device)
    return invalid_argument("copy_on_device: the tensor is in " + device.memory_name());
  RUNNEL_ASSIGN_OR_RETURN(tensor out, allocate(device.type(), device.shape(), node));
  RUNNEL_RETURN_IF_ERROR(copy_device_bytes(out.raw_data(), device.raw_data(), device.bytes()));
  return out;
}

status gpu_context::copy_device_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0)
    return {};
  RUNNEL_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
  d2d_bytes_.fetch_add(int64_t(bytes), std::memory_order_relaxed);
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, compute_),
                     "device-to-device copy on GPU " + std::to_string(device_));
}

result<std::shared_ptr<void>>
gpu_context::cached_plan(const std::string& key,
                         const std::function<result<std::shared_ptr<void>>()>& make) {
  std::lock_guard lock(plans_mu_);
  auto it = plans_.find(key);
  if (it != plans_.end())
    return it->second;
  RUNNEL_ASSIGN_OR_RETURN(auto plan, make());
  plans_.emplace(key, plan);
  return plan;
}

void gpu_context::reap_staging(bool wait) {
  std::lock_guard lock(staging_mu_);
  std::erase_if(staging_, [&](auto& entry) {
    auto [event, pinned] = entry;
    if (wait)
      cudaEventSynchronize(event);
    else if (cudaEventQuery(event) != cudaSuccess)
      return false;
    cudaEventDestroy(event);
    (void)pinned_->deallocate(pinned);
    return true;
  });
}

status gpu_context::synchronize() {
  RUNNEL_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
  for (cudaStream_t s : {compute_, h2d_, d2h_, d2d_})
    RUNNEL_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(s), "GPU " + std::to_string(device_)));
  reap_staging(true);
  return {};
}

} // namespace runnel
