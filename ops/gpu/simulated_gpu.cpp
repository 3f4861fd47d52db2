#include "runnel/ops/gpu/simulated_gpu.hpp"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/cpu/builtin_kernels.hpp"

namespace runnel {
namespace {

/// An in-order stream: one thread running posted work first come, first served.
class serial_stream {
public:
  serial_stream() : thread_([this] { run(); }) {}
  ~serial_stream() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void post(std::function<void()> work) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_one();
  }

private:
  void run() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty())
          return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

class simulated_accelerator;

/// A CPU kernel run on the simulated GPU's compute stream.
class simulated_kernel : public kernel {
public:
  simulated_kernel(simulated_accelerator& gpu, std::unique_ptr<kernel> cpu_kernel, std::string node)
      : gpu_(gpu), inner_(std::move(cpu_kernel)), node_(std::move(node)) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("GPU kernels are asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override;

private:
  simulated_accelerator& gpu_;
  std::unique_ptr<kernel> inner_;
  std::string node_;
};

tensor host_view(const tensor& device);

/// A state kernel (VariableV2, Assign, Apply*, Scatter*) of the simulated GPU: its CPU kernel on
/// host views of the inputs in (simulated) device memory.
class simulated_state_kernel : public kernel {
public:
  explicit simulated_state_kernel(std::unique_ptr<kernel> inner) : inner_(std::move(inner)) {}
  bool is_async() const override { return inner_->is_async(); }
  bool accepts_device_inputs() const override { return true; }
  std::shared_ptr<variable> variable_resource() const override { return inner_->variable_resource(); }
  status compute(kernel_context& ctx) override {
    auto call = prepare(ctx);
    status st = inner_->compute(*call->ctx);
    finish(ctx, *call);
    return st;
  }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    auto call = prepare(ctx);
    inner_->compute_async(*call->ctx, [&ctx, call, done = std::move(done)](status st) {
      if (st.ok())
        finish(ctx, *call);
      done(st);
    });
  }

private:
  struct call_state {
    std::vector<tensor> views;
    std::unique_ptr<kernel_context> ctx;
  };
  static std::shared_ptr<call_state> prepare(kernel_context& ctx) {
    auto call = std::make_shared<call_state>();
    for (auto& t : ctx.inputs())
      call->views.push_back(t.valid() && !t.host_readable() ? host_view(t) : t);
    call->ctx = std::make_unique<kernel_context>(call->views, int(ctx.outputs().size()),
                                                 ctx.has_cpu() ? &ctx.cpu() : nullptr);
    call->ctx->set_step_id(ctx.step_id());
    call->ctx->set_step_container(ctx.step_container());
    return call;
  }
  static void finish(kernel_context& ctx, call_state& call) {
    for (size_t i = 0; i < call.ctx->outputs().size(); ++i)
      ctx.set_output(int(i), std::move(call.ctx->outputs()[i]));
  }
  std::unique_ptr<kernel> inner_;
};

class simulated_accelerator : public accelerator {
public:
  simulated_accelerator(int id, size_t limit)
      : id_(id), allocator_(std::make_unique<host_sub_allocator>(),
                            bfc_options{.memory_limit = limit,
                                        .name = "GPU:" + std::to_string(id) + " (simulated)"}),
        cpu_(0) {}

  int id() const override { return id_; }
  std::string kind() const override { return "simulated"; }
  bfc_stats memory_stats() const override { return allocator_.stats(); }
  void reset_memory_peak() override { allocator_.reset_peak(); }

  result<tensor> allocate(dtype t, const shape& s, const std::string& node) {
    return allocate_device_tensor(allocator_, t, s, node, id_);
  }

  result<std::unique_ptr<kernel>> make_kernel(const kernel_construction& c) override {
    RUNNEL_ASSIGN_OR_RETURN(auto* factory, builtin_kernels().find(c.node, device_type::cpu));
    kernel_construction cpu_c{c.node, c.graph, device_type::cpu, &cpu_, c.resources,
                              c.output_value_needed};
    RUNNEL_ASSIGN_OR_RETURN(auto inner, (*factory)(cpu_c));
    // Variables and their updates: the CPU kernels as they are, at the variable's actor, on
    // views of device inputs (the simulated GPU's memory is host memory).
    if (inner->is_async() || inner->variable_resource())
      return std::unique_ptr<kernel>(std::make_unique<simulated_state_kernel>(std::move(inner)));
    return std::unique_ptr<kernel>(
        std::make_unique<simulated_kernel>(*this, std::move(inner), c.node.name));
  }

  void copy_to_device(tensor host, const std::string& node,
                      std::function<void(status, tensor)> done) override {
    auto dev = allocate(host.type(), host.shape(), node);
    if (!dev.ok())
      return done(dev.error(), {});
    h2d_.post([host = std::move(host), dev = std::move(dev).value(), done = std::move(done)] {
      if (host.bytes())
        std::memcpy(dev.raw_data(), host.raw_data(), host.bytes());
      done({}, dev);
    });
  }

  void copy_to_host(tensor device, std::function<void(status, tensor)> done) override {
    // After the compute work enqueued so far (the producer's), as an event would order it.
    compute_.post([this, device = std::move(device), done = std::move(done)]() mutable {
      d2h_.post([device = std::move(device), done = std::move(done)] {
        tensor host(device.type(), device.shape());
        if (host.bytes())
          std::memcpy(host.raw_data(), device.raw_data(), host.bytes());
        done({}, std::move(host));
      });
    });
  }

  result<tensor> upload(const tensor& host, const std::string& node) override {
    RUNNEL_ASSIGN_OR_RETURN(tensor dev, allocate(host.type(), host.shape(), node));
    if (host.bytes())
      std::memcpy(dev.raw_data(), host.raw_data(), host.bytes());
    return dev;
  }

  transfer_stats transfers() const override { return {}; }

  result<tensor> read_to_host(const tensor& device) override {
    tensor host(device.type(), device.shape());
    if (host.bytes())
      std::memcpy(host.raw_data(), device.raw_data(), host.bytes());
    return host;
  }

  gpu_throughput measure() override {
    // The simulated GPU computes with one host thread and copies with memcpy: measure those.
    using clock = std::chrono::steady_clock;
    constexpr int64_t n = 256;
    std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f);
    tensor ta = tensor::from_values<float>({n, n}, a), tb = tensor::from_values<float>({n, n}, b);
    double best_mm = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = clock::now();
      float acc = 0;
      const float* pa = ta.data<float>();
      const float* pb = tb.data<float>();
      for (int64_t i = 0; i < n; i += 8) // a strided sample of the product, enough for a rate
        for (int64_t j = 0; j < n; ++j)
          for (int64_t k = 0; k < n; ++k)
            acc += pa[i * n + k] * pb[k * n + j];
      volatile float sink = acc;
      (void)sink;
      best_mm = std::min(best_mm, std::chrono::duration<double>(clock::now() - t0).count() * 8);
    }
    std::vector<char> src(size_t(16) << 20, 1), dst(src.size());
    double best_copy = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = clock::now();
      std::memcpy(dst.data(), src.data(), src.size());
      best_copy = std::min(best_copy, std::chrono::duration<double>(clock::now() - t0).count());
    }
    double copy_rate = double(src.size()) / best_copy;
    return {2.0 * n * n * n / best_mm, copy_rate, copy_rate};
  }

  void wait_idle() override {
    // compute first: its work may post copies to d2h.
    for (serial_stream* st : {&compute_, &h2d_, &d2h_}) {
      std::promise<void> drained;
      st->post([&drained] { drained.set_value(); });
      drained.get_future().wait();
    }
  }

  serial_stream& compute() { return compute_; }
  cpu_device& cpu() { return cpu_; }

private:
  int id_;
  bfc_allocator allocator_;
  cpu_device cpu_; // no pool: kernels run on the compute thread alone
  // Streams last: their threads stop (finishing queued work) before the memory goes.
  serial_stream h2d_, d2h_, compute_;
};

/// A view of device memory as host memory: only the simulated GPU's own kernels make these.
tensor host_view(const tensor& device) {
  auto* keep = new tensor(device);
  return tensor::wrap(
      device.type(), device.shape(), device.raw_data(),
      [](void* p) { delete static_cast<tensor*>(p); }, keep);
}

void simulated_kernel::compute_async(kernel_context& ctx, std::function<void(status)> done) {
  gpu_.compute().post([this, &ctx, done = std::move(done)] {
    // Host inputs are copied into device memory first (and count against it), as on a GPU.
    std::vector<tensor> views;
    for (auto& t : ctx.inputs()) {
      if (!t.valid() || t.memory() == memory_space::device) {
        views.push_back(t.valid() ? host_view(t) : t);
        continue;
      }
      auto staged = gpu_.allocate(t.type(), t.shape(), node_);
      if (!staged.ok())
        return done(staged.error());
      if (t.bytes())
        std::memcpy(staged->raw_data(), t.raw_data(), t.bytes());
      views.push_back(host_view(*staged));
    }
    // A second reference to each view: a view looks unique to the CPU kernel, which would then
    // write its output in place over a device tensor other consumers still read.
    std::vector<tensor> pins = views;
    kernel_context inner(views, int(ctx.outputs().size()), &gpu_.cpu());
    inner.set_step_id(ctx.step_id());
    status st = inner_->compute(inner);
    for (size_t i = 0; st.ok() && i < inner.outputs().size(); ++i) {
      tensor& out = inner.outputs()[i];
      if (!out.valid())
        continue;
      auto dev = gpu_.allocate(out.type(), out.shape(), node_);
      if (!dev.ok()) {
        st = dev.error();
        break;
      }
      if (out.bytes())
        std::memcpy(dev->raw_data(), out.raw_data(), out.bytes());
      ctx.set_output(int(i), std::move(dev).value());
    }
    done(st);
  });
}

} // namespace

std::unique_ptr<accelerator> make_simulated_gpu(int id, size_t memory_limit) {
  return std::make_unique<simulated_accelerator>(id, memory_limit);
}

} // namespace runnel
