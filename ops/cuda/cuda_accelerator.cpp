#include "runnel/ops/cuda/cuda_accelerator.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <span>
#include <thread>

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

class cuda_accelerator;

/// One node's CUDA kernel: enqueue on the compute stream, complete on its event.
class cuda_kernel : public kernel {
public:
  /// Enqueues the kernel on `inputs` (all in device memory); sets ctx's outputs.
  using launch_fn =
      std::function<status(gpu_context&, std::span<const tensor> inputs, kernel_context& ctx)>;
  /// `host_inputs`: input slots read on the host (a reduction's axes): not copied to the GPU.
  cuda_kernel(cuda_accelerator& gpu, launch_fn launch, std::vector<bool> host_inputs = {})
      : gpu_(gpu), launch_(std::move(launch)), host_inputs_(std::move(host_inputs)) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("GPU kernels are asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override;

private:
  cuda_accelerator& gpu_;
  launch_fn launch_;
  std::vector<bool> host_inputs_;
};

class cuda_accelerator : public accelerator {
public:
  cuda_accelerator(int index, std::unique_ptr<gpu_context> ctx)
      : index_(index), ctx_(std::move(ctx)) {}
  ~cuda_accelerator() override { (void)ctx_->synchronize(); }

  int id() const override { return index_; }
  std::string kind() const override { return "CUDA"; }
  bfc_stats memory_stats() const override { return ctx_->allocator().stats(); }
  gpu_context& context() { return *ctx_; }
  event_poller& poller() { return poller_; }

  result<std::unique_ptr<kernel>> make_kernel(const kernel_construction& c) override {
    const std::string& op = c.node.op;
    std::string name = c.node.name;
    // Most ops have one output, which their entry allocates: `f(gpu, inputs, &out)`.
    auto one = [&](auto f, std::vector<bool> host_inputs = {}) {
      return result<std::unique_ptr<kernel>>(std::make_unique<cuda_kernel>(
          *this,
          [f](gpu_context& g, std::span<const tensor> in, kernel_context& ctx) {
            tensor out;
            RUNNEL_RETURN_IF_ERROR(f(g, in, &out));
            ctx.set_output(0, std::move(out));
            return status{};
          },
          std::move(host_inputs)));
    };
    using inputs = std::span<const tensor>;
    static const std::vector<std::pair<const char*, gpu_binary>> binaries{
        {"Add", gpu_binary::add},           {"Sub", gpu_binary::sub},
        {"Mul", gpu_binary::mul},           {"Div", gpu_binary::div},
        {"Maximum", gpu_binary::maximum},   {"Minimum", gpu_binary::minimum},
        {"SquaredDifference", gpu_binary::squared_difference},
        {"ReluGrad", gpu_binary::relu_grad}, {"SigmoidGrad", gpu_binary::sigmoid_grad},
        {"TanhGrad", gpu_binary::tanh_grad}, {"Greater", gpu_binary::greater},
        {"Less", gpu_binary::less},         {"Equal", gpu_binary::equal}};
    static const std::vector<std::pair<const char*, gpu_unary>> unaries{
        {"Neg", gpu_unary::neg},       {"Exp", gpu_unary::exp},       {"Log", gpu_unary::log},
        {"Sqrt", gpu_unary::sqrt},     {"Square", gpu_unary::square}, {"Tanh", gpu_unary::tanh},
        {"Sigmoid", gpu_unary::sigmoid}, {"Relu", gpu_unary::relu},   {"Abs", gpu_unary::abs},
        {"Rsqrt", gpu_unary::rsqrt},   {"Reciprocal", gpu_unary::reciprocal}};
    static const std::vector<std::pair<const char*, gpu_reduce>> reductions{
        {"Sum", gpu_reduce::sum}, {"Mean", gpu_reduce::mean}, {"Max", gpu_reduce::max},
        {"Min", gpu_reduce::min}};
    for (auto& [o, kind] : binaries)
      if (op == o)
        return one([kind = kind, name](gpu_context& g, inputs in, tensor* out) {
          return binary_cuda(g, kind, in[0], in[1], out, name);
        });
    for (auto& [o, kind] : unaries)
      if (op == o)
        return one([kind = kind, name](gpu_context& g, inputs in, tensor* out) {
          return unary_cuda(g, kind, in[0], out, name);
        });
    for (auto& [o, kind] : reductions)
      if (op == o) // the axes (input 1) are read in host memory
        return one(
            [kind = kind, keep = c.attr<bool>("keep_dims"), name](gpu_context& g, inputs in,
                                                                  tensor* out) {
              return reduce_cuda(g, kind, in[0], in[1], keep, out, name);
            },
            {false, true});
    if (op == "Cast")
      return one([to = c.attr<dtype>("DstT"), name](gpu_context& g, inputs in, tensor* out) {
        return cast_cuda(g, in[0], to, out, name);
      });
    if (op == "MatMul")
      return one([o = gpu_matmul_options{.transpose_a = c.attr<bool>("transpose_a"),
                                         .transpose_b = c.attr<bool>("transpose_b")},
                  name](gpu_context& g, inputs in, tensor* out) {
        return matmul_cuda(g, in[0], in[1], o, out, name);
      });
    if (op == "MaxPool") {
      auto k = c.attr<std::vector<int64_t>>("ksize");
      auto st = c.attr<std::vector<int64_t>>("strides");
      if (k.size() != 4 || st.size() != 4)
        return invalid_argument("node '" + name + "' (op MaxPool): ksize and strides need 4 values");
      gpu_pool_options o{.window_h = k[1], .window_w = k[2], .stride_h = st[1], .stride_w = st[2],
                         .padding = c.attr<std::string>("padding")};
      return one([o, name](gpu_context& g, inputs in, tensor* out) {
        return max_pool_cuda(g, in[0], o, out, name);
      });
    }
    if (op == "Conv2D") {
      auto strides = c.attr<std::vector<int64_t>>("strides");
      gpu_conv2d_options o{.stride_h = strides.size() == 4 ? strides[1] : 1,
                           .stride_w = strides.size() == 4 ? strides[2] : 1,
                           .padding = c.attr<std::string>("padding")};
      return one([o, name](gpu_context& g, inputs in, tensor* out) {
        return conv2d_cuda(g, in[0], in[1], o, out, name);
      });
    }
    if (op == "BiasAdd")
      return one([name](gpu_context& g, inputs in, tensor* out) {
        return bias_add_cuda(g, in[0], in[1], out, name);
      });
    if (op == "BiasAddGrad")
      return one([name](gpu_context& g, inputs in, tensor* out) {
        return bias_add_grad_cuda(g, in[0], out, name);
      });
    if (op == "Softmax")
      return one([name](gpu_context& g, inputs in, tensor* out) {
        return softmax_cuda(g, in[0], out, name);
      });
    if (op == "Const") {
      auto cached = std::make_shared<tensor>();
      return one([value = std::get<tensor>(c.node.attrs.at("value")), cached,
                  name](gpu_context& g, inputs, tensor* out) -> status {
        if (!cached->valid()) { // a constant goes to the device on its first step only
          RUNNEL_ASSIGN_OR_RETURN(*cached, g.to_device(value, name));
        }
        *out = *cached;
        return {};
      });
    }
    if (op == "SparseSoftmaxCrossEntropyWithLogits") // two outputs
      return result<std::unique_ptr<kernel>>(std::make_unique<cuda_kernel>(
          *this, [name](gpu_context& g, inputs in, kernel_context& ctx) {
            tensor loss, backprop;
            RUNNEL_RETURN_IF_ERROR(
                sparse_softmax_xent_cuda(g, in[0], in[1], &loss, &backprop, name));
            ctx.set_output(0, std::move(loss));
            ctx.set_output(1, std::move(backprop));
            return status{};
          }));
    return unimplemented("node '" + name + "' (op " + op + "): no CUDA kernel");
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
  event_poller poller_;
};

void cuda_kernel::compute_async(kernel_context& ctx, std::function<void(status)> done) {
  if (cudaError_t e = cudaSetDevice(gpu_.context().device()); e != cudaSuccess)
    return done(cuda_status(e, "cudaSetDevice"));
  // Host inputs (feeds, constants, values from a CPU) go to the device first: the copy is on
  // the h2d stream and the compute stream waits for it.
  auto staged = std::make_shared<std::vector<tensor>>();
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const tensor& t = ctx.input(i);
    bool on_host = size_t(i) < host_inputs_.size() && host_inputs_[size_t(i)];
    if (!t.valid() || t.memory() == memory_space::device || on_host) {
      if (on_host && !t.host_readable()) { // produced on a GPU: read it back (small)
        auto h = gpu_.context().to_host(t);
        if (!h.ok())
          return done(h.error());
        staged->push_back(std::move(h).value());
        continue;
      }
      staged->push_back(t);
      continue;
    }
    auto dev = gpu_.context().to_device(t);
    if (!dev.ok())
      return done(dev.error());
    staged->push_back(std::move(dev).value());
  }
  status st = launch_(gpu_.context(), *staged, ctx);
  if (!st.ok())
    return done(st);
  // The node is done when the compute stream reaches this point; its inputs stay referenced
  // (the node's call and `staged`) until then, so their memory is not reused under the kernel.
  gpu_.poller().after(gpu_.context().compute(),
                      [staged, done = std::move(done)](status st) { done(st); });
}

} // namespace

result<std::unique_ptr<accelerator>> make_cuda_accelerator(int index, int cuda_device,
                                                           size_t memory_limit) {
  RUNNEL_ASSIGN_OR_RETURN(auto ctx, gpu_context::create(cuda_device, memory_limit));
  return std::unique_ptr<accelerator>(std::make_unique<cuda_accelerator>(index, std::move(ctx)));
}

} // namespace runnel
