#include "runnel/ops/cuda/cuda_accelerator.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <span>
#include <thread>

#include "runnel/ops/cuda/cuda_kernel.hpp"
#include "runnel/ops/cuda/kernels.hpp"

namespace runnel {
namespace {

/// Completes callbacks when their events are reached, from one thread.
class event_poller {
public:
  event_poller() : thread_([this] { run(); }) {}
  ~event_poller() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  /// Returns once no completion is pending or running.
  void wait_idle() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return pending_.empty() && running_ == 0; });
  }
  /// Records an event on `stream` now; `done` runs once the stream reaches it.
  void after(cudaStream_t stream, std::function<void(status)> done) {
    cudaEvent_t e;
    status st = cuda_status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
    if (st.ok())
      st = cuda_status(cudaEventRecord(e, stream), "event");
    if (!st.ok())
      return done(st);
    {
      std::lock_guard lock(mu_);
      pending_.push_back({e, std::move(done)});
    }
    cv_.notify_one();
  }

private:
  struct waiter {
    cudaEvent_t event;
    std::function<void(status)> done;
  };
  void run() {
    for (;;) {
      std::vector<waiter> ready;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
        if (stop_ && pending_.empty())
          return;
        for (auto it = pending_.begin(); it != pending_.end();) {
          cudaError_t q = cudaEventQuery(it->event);
          if (q == cudaErrorNotReady) {
            ++it;
            continue;
          }
          ready.push_back(std::move(*it));
          ready.back().done = [d = std::move(ready.back().done), q](status) mutable {
            d(cuda_status(q, "GPU kernel"));
          };
          it = pending_.erase(it);
        }
        running_ = int(ready.size());
      }
      for (auto& w : ready) {
        cudaEventDestroy(w.event);
        w.done({});
      }
      {
        std::lock_guard lock(mu_);
        running_ = 0;
        if (pending_.empty())
          idle_.notify_all();
      }
      if (ready.empty())
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<waiter> pending_;
  int running_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

class cuda_accelerator : public accelerator, public cuda_device {
public:
  cuda_accelerator(int index, std::unique_ptr<gpu_context> ctx, bool stream_ordered)
      : index_(index), ctx_(std::move(ctx)), stream_ordered_(stream_ordered) {}
  ~cuda_accelerator() override { (void)ctx_->synchronize(); }

  int id() const override { return index_; }
  std::string kind() const override { return "CUDA"; }
  bfc_stats memory_stats() const override { return ctx_->allocator().stats(); }
  void reset_memory_peak() override { ctx_->allocator().reset_peak(); }
  gpu_context& context() override { return *ctx_; }
  void finish(std::shared_ptr<std::vector<tensor>> staged,
              std::function<void(status)> done) override {
    if (stream_ordered_) {
      // Freed now, reused only by work ordered after this on the compute stream, or by copies
      // that wait for it (gpu_context::to_device).
      staged->clear();
      return done({});
    }
    poller_.after(ctx_->compute(), [staged = std::move(staged), done = std::move(done)](status st) {
      staged->clear();
      done(st);
    });
  }

  status synchronize() override { return ctx_->synchronize(); }

  result<std::unique_ptr<kernel>> make_kernel(const kernel_construction& c) override {
    auto& table = cuda_kernels();
    auto it = table.find(c.node.op);
    if (it == table.end())
      return unimplemented("node '" + c.node.name + "' (op " + c.node.op + "): no CUDA kernel");
    return it->second(c, *this);
  }

  void copy_to_device(tensor host, const std::string& node,
                      std::function<void(status, tensor)> done) override {
    auto dev = ctx_->to_device(host, node); // enqueued on the h2d stream, compute waits for it
    if (!dev.ok())
      return done(dev.error(), {});
    poller_.after(ctx_->host_to_device(), [dev = std::move(dev).value(), done = std::move(done)](
                                              status st) mutable { done(st, std::move(dev)); });
  }

  result<tensor> read_to_host(const tensor& device) override { return ctx_->to_host(device); }

  result<tensor> upload(const tensor& host, const std::string& node) override {
    std::lock_guard lock(ctx_->launch_mutex());
    return ctx_->to_device(host, node);
  }

  transfer_stats transfers() const override {
    return {ctx_->bytes_to_device(), ctx_->bytes_to_host(), ctx_->bytes_on_device()};
  }

  void wait_idle() override {
    (void)ctx_->synchronize();
    poller_.wait_idle();
  }

  gpu_throughput measure() override {
    gpu_throughput t;
    gpu_context& g = *ctx_;
    cudaSetDevice(g.device());
    constexpr int64_t n = 2048, bytes = int64_t(64) << 20;
    auto a = g.allocate(dtype::f32, shape{n, n}), c = g.allocate(dtype::f32, shape{n, n});
    auto d = g.allocate(dtype::u8, shape{bytes}), e = g.allocate(dtype::u8, shape{bytes});
    void* pinned = nullptr;
    if (!a.ok() || !c.ok() || !d.ok() || !e.ok() || cudaMallocHost(&pinned, bytes) != cudaSuccess)
      return t; // zeros: the cost model keeps its defaults
    cudaMemsetAsync(a->raw_data(), 0, a->bytes(), g.compute());
    double mm = stream_seconds(g.compute(), [&] {
      tensor out;
      (void)matmul_cuda(g, *a, *a, {}, &out, "measure");
    }, 5);
    double copy = stream_seconds(g.compute(), [&] {
      cudaMemcpyAsync(e->raw_data(), d->raw_data(), bytes, cudaMemcpyDeviceToDevice, g.compute());
    }, 5);
    double h2d = stream_seconds(g.host_to_device(), [&] {
      cudaMemcpyAsync(d->raw_data(), pinned, bytes, cudaMemcpyHostToDevice, g.host_to_device());
    }, 5);
    cudaFreeHost(pinned);
    t.flops_per_s = 2.0 * double(n) * n * n / mm;
    t.bytes_per_s = 2.0 * double(bytes) / copy; // read and write
    t.host_link_bytes_per_s = double(bytes) / h2d;
    return t;
  }

  void copy_to_host(tensor device, std::function<void(status, tensor)> done) override {
    // to_host orders the copy after the compute stream's work and waits for it; done here on the
    // caller's thread (a _Send's), which may block briefly.
    auto host = ctx_->to_host(device);
    if (!host.ok())
      return done(host.error(), {});
    done({}, std::move(host).value());
  }

private:
  int index_;
  std::unique_ptr<gpu_context> ctx_;
  bool stream_ordered_;
  event_poller poller_;
};

} // namespace

status stage_inputs(gpu_context& gpu, std::span<const tensor> inputs,
                    const std::vector<slot_memory>& slots, std::vector<tensor>& staged) {
  staged.clear();
  staged.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const tensor& t = inputs[i];
    slot_memory where = i < slots.size() ? slots[i] : slot_memory::device;
    bool other_gpu = t.valid() && t.memory() == memory_space::device && t.device_id() != gpu.device();
    if (!t.valid() || (where == slot_memory::any && !other_gpu) ||
        (where == slot_memory::host && t.host_readable())) {
      staged.push_back(t);
    } else if (where == slot_memory::host) { // produced on a GPU: read it back (small)
      RUNNEL_ASSIGN_OR_RETURN(tensor h, gpu.to_host(t));
      staged.push_back(std::move(h));
    } else if (t.memory() == memory_space::device && t.device_id() == gpu.device()) {
      staged.push_back(t);
    } else if (other_gpu) { // another GPU's: copied over directly
      RUNNEL_ASSIGN_OR_RETURN(tensor here, gpu.copy_on_device(t));
      staged.push_back(std::move(here));
    } else {
      RUNNEL_ASSIGN_OR_RETURN(tensor dev, gpu.to_device(t));
      staged.push_back(std::move(dev));
    }
  }
  return {};
}

void cuda_kernel::compute_async(kernel_context& ctx, std::function<void(status)> done) {
  gpu_context& g = gpu_.context();
  if (cudaError_t e = cudaSetDevice(g.device()); e != cudaSuccess)
    return done(cuda_status(e, "cudaSetDevice"));
  auto staged = std::make_shared<std::vector<tensor>>();
  status st;
  {
    // One thread enqueues at a time: the cuBLAS and cuDNN handles are the context's.
    std::lock_guard lock(g.launch_mutex());
    st = stage_inputs(g, ctx.inputs(), slots_, *staged);
    if (st.ok())
      st = launch_(g, *staged, ctx);
  }
  if (!st.ok())
    return done(st);
  gpu_.finish(std::move(staged), std::move(done));
}

result<window_attrs> read_window_attrs(const kernel_construction& c, bool has_ksize) {
  window_attrs w;
  auto strides = c.attr<std::vector<int64_t>>("strides");
  if (strides.size() != 4)
    return invalid_argument("node '" + c.node.name + "' (op " + c.node.op +
                            "): strides need 4 values (NHWC)");
  w.stride_h = strides[1];
  w.stride_w = strides[2];
  if (has_ksize) {
    auto k = c.attr<std::vector<int64_t>>("ksize");
    if (k.size() != 4)
      return invalid_argument("node '" + c.node.name + "' (op " + c.node.op +
                              "): ksize needs 4 values (NHWC)");
    w.window_h = k[1];
    w.window_w = k[2];
  }
  w.padding = c.attr<std::string>("padding");
  return w;
}

// Every CUDA kernel family, from the list the build generates out of the
// RUNNEL_CUDA_KERNEL_FAMILY lines of cuda_kernels_*.cpp (cmake/ops_families.cmake).
#define RUNNEL_FAMILY(family, fn) void add_##fn##_cuda_kernels(cuda_kernel_table& t);
#include "runnel/ops/cuda/cuda_kernel_families.inc"
#undef RUNNEL_FAMILY

const cuda_kernel_table& cuda_kernels() {
  static const cuda_kernel_table table = [] {
    cuda_kernel_table t;
#define RUNNEL_FAMILY(family, fn) add_##fn##_cuda_kernels(t);
#include "runnel/ops/cuda/cuda_kernel_families.inc"
#undef RUNNEL_FAMILY
    return t;
  }();
  return table;
}

std::map<std::string, std::string> builtin_cuda_kernel_families() {
  std::map<std::string, std::string> out;
  auto record = [&](const char* family, void (*add)(cuda_kernel_table&)) {
    cuda_kernel_table one;
    add(one);
    for (auto& [op, factory] : one)
      out[op] = family;
  };
#define RUNNEL_FAMILY(family, fn) record(#family, add_##fn##_cuda_kernels);
#include "runnel/ops/cuda/cuda_kernel_families.inc"
#undef RUNNEL_FAMILY
  return out;
}

std::vector<std::string> cuda_kernel_op_names() {
  std::vector<std::string> names;
  for (auto& [op, f] : cuda_kernels())
    names.push_back(op);
  return names;
}

result<std::unique_ptr<accelerator>> make_cuda_accelerator(int index, int cuda_device,
                                                           size_t memory_limit,
                                                           bool stream_ordered) {
  RUNNEL_ASSIGN_OR_RETURN(auto ctx, gpu_context::create(cuda_device, memory_limit));
  return std::unique_ptr<accelerator>(
      std::make_unique<cuda_accelerator>(index, std::move(ctx), stream_ordered));
}

} // namespace runnel
