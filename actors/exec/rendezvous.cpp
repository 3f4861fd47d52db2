#include "runnel/actors/exec/rendezvous.hpp"

#include "runnel/ops/gpu/accelerator.hpp"

#include "runnel/placement/partition.hpp"

namespace runnel {

void local_rendezvous::spin_then_block::pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

void local_rendezvous::send(int64_t step, const std::string& key, tensor value) {
  recv_fn ready;
  {
    std::lock_guard lock(mu_);
    if (!cancelled_.empty() && cancelled_.count(step))
      return; // the step failed elsewhere: nobody will receive it
    auto& table = steps_[step];
    auto& s = table[key];
    if (s.waiting) {
      ready = std::move(s.waiting);
      table.erase(key);
      if (table.empty())
        steps_.erase(step);
    } else {
      s.value = std::move(value);
      s.has_value = true;
      return;
    }
  }
  ready({}, std::move(value));
}

void local_rendezvous::recv(int64_t step, const std::string& key, recv_fn done) {
  tensor value;
  {
    std::unique_lock lock(mu_);
    if (!cancelled_.empty() && cancelled_.count(step)) {
      lock.unlock();
      done(cancelled("step " + std::to_string(step) + " was cancelled before '" + key +
                     "' was received"),
           {});
      return;
    }
    auto& table = steps_[step];
    auto& s = table[key];
    if (!s.has_value) {
      s.waiting = std::move(done);
      return;
    }
    value = std::move(s.value);
    table.erase(key);
    if (table.empty())
      steps_.erase(step);
  }
  done({}, std::move(value));
}

void local_rendezvous::send_remote(int64_t step, const std::string& key, tensor value) {
  {
    std::lock_guard lock(mu_);
    auto now = std::chrono::steady_clock::now();
    expire_unclaimed(now);
    bool claimed = active_.count(step) > 0;
    if (!claimed) {
      auto it = steps_.find(step);
      if (it != steps_.end()) {
        auto s = it->second.find(key);
        claimed = s != it->second.end() && s->second.waiting;
      }
    }
    if (!claimed) {
      uint64_t bytes = value.type() == dtype::string ? 64 * uint64_t(value.num_elements())
                                                     : uint64_t(value.bytes());
      if (unclaimed_bytes_ + bytes > max_unclaimed_bytes_) {
        unclaimed_dropped_++;
        return; // over the limit even after expiring: this one goes
      }
      if (!cancelled_.empty() && cancelled_.count(step))
        return;
      auto& s = steps_[step][key];
      if (s.has_value)
        return; // a duplicate (a frame resent on a fresh connection): one value per key
      s.value = std::move(value);
      s.has_value = true;
      unclaimed_.push_back({now, step, key, bytes});
      unclaimed_bytes_ += bytes;
      return;
    }
  }
  send(step, key, std::move(value));
}

void local_rendezvous::expire_unclaimed(std::chrono::steady_clock::time_point now) {
  while (!unclaimed_.empty()) {
    auto& u = unclaimed_.front();
    bool gone = true; // taken by its Recv, or its step ended
    auto it = steps_.find(u.step);
    if (it != steps_.end()) {
      auto s = it->second.find(u.key);
      gone = s == it->second.end() || !s->second.has_value;
    }
    if (!gone && !active_.count(u.step)) {
      if (now - u.arrived < unclaimed_ttl_)
        break; // the oldest unclaimed value is still in its time
      it->second.erase(u.key);
      if (it->second.empty())
        steps_.erase(it);
      unclaimed_dropped_++;
    }
    unclaimed_bytes_ -= u.bytes;
    unclaimed_.pop_front();
  }
}

void local_rendezvous::begin_step(int64_t step) {
  std::lock_guard lock(mu_);
  active_.insert(step);
}

void local_rendezvous::set_unclaimed_limits(uint64_t max_bytes, std::chrono::milliseconds ttl) {
  std::lock_guard lock(mu_);
  max_unclaimed_bytes_ = max_bytes;
  unclaimed_ttl_ = ttl;
}

uint64_t local_rendezvous::unclaimed_bytes() const {
  std::lock_guard lock(mu_);
  return unclaimed_bytes_;
}

void local_rendezvous::end_step(int64_t step) {
  slot_table left;
  {
    std::lock_guard lock(mu_);
    active_.erase(step);
    auto it = steps_.find(step);
    if (it == steps_.end())
      return;
    left = std::move(it->second);
    steps_.erase(it);
  }
  for (auto& [key, s] : left)
    if (s.waiting)
      s.waiting(cancelled("step " + std::to_string(step) + " ended before '" + key +
                          "' was sent"),
                {});
}

void local_rendezvous::cancel_step(int64_t step) {
  {
    std::lock_guard lock(mu_);
    if (cancelled_.insert(step).second) {
      cancelled_order_.push_back(step);
      if (cancelled_order_.size() > 4096) {
        cancelled_.erase(cancelled_order_.front());
        cancelled_order_.pop_front();
      }
    }
  }
  end_step(step);
}

void local_rendezvous::cancel_all(const std::string& reason) {
  std::unordered_map<int64_t, slot_table> left;
  {
    std::lock_guard lock(mu_);
    left.swap(steps_);
  }
  for (auto& [step, table] : left)
    for (auto& [key, s] : table)
      if (s.waiting)
        s.waiting(cancelled(reason), {});
}

void process_rendezvous::set_remote(remote_fn remote) {
  std::lock_guard lock(mu_);
  remote_ = remote ? std::make_shared<const remote_fn>(std::move(remote)) : nullptr;
}

void process_rendezvous::send(int64_t step, const std::string& key,
                              const std::string& recv_device, tensor value, bool wire_bf16,
                              int64_t priority, std::function<void(status)> done) {
  if (recv_device.compare(0, prefix_.size(), prefix_) == 0) {
    local_.send(step, key, std::move(value));
    done({});
    return;
  }
  std::shared_ptr<const remote_fn> remote;
  {
    std::lock_guard lock(mu_);
    remote = remote_;
  }
  if (!remote) {
    done(unavailable("no route to device '" + recv_device + "': this process (" + prefix_ +
                     ") is not part of a cluster"));
    return;
  }
  (*remote)(step, key, recv_device, std::move(value), wire_bf16, priority, std::move(done));
}

void process_rendezvous::recv(int64_t step, const std::string& key,
                              std::function<void(status, tensor)> done) {
  local_.recv(step, key, std::move(done));
}

namespace {

bool wire_bf16(const node& n) {
  auto v = find_attr<bool>(n.attrs, "_wire_bf16");
  return v.ok() && *v;
}

/// The partitioner's `_priority` of a _Send (0 when absent: sends then go out in order).
int64_t send_priority(const node& n) {
  auto v = find_attr<int64_t>(n.attrs, "_priority");
  return v.ok() ? *v : 0;
}

std::string key_of(const kernel_construction& c) {
  return rendezvous_key(c.attr<std::string>("send_device"),
                        c.attr<int64_t>("send_device_incarnation"),
                        c.attr<std::string>("recv_device"), c.attr<std::string>("tensor_name"));
}

result<tensor_rendezvous*> rendezvous_of(const kernel_construction& c) {
  tensor_rendezvous* r = c.resources ? c.resources->rendezvous() : nullptr;
  if (!r)
    return failed_precondition("node '" + c.node.name + "' (op " + c.node.op +
                               "): this runtime has no rendezvous");
  return r;
}

/// How a dead value (a branch not taken, a loop's last iteration) crosses: an empty tensor of
/// another dtype than the edge's, which no live value of the edge can be.
tensor dead_marker(dtype edge) {
  return tensor(edge == dtype::u8 ? dtype::i8 : dtype::u8, shape{0});
}

class send_kernel : public kernel {
public:
  send_kernel(tensor_rendezvous& r, std::string key, std::string recv_device, dtype type,
              bool wire_bf16, int64_t priority)
      : r_(r), process_(dynamic_cast<process_rendezvous*>(&r)), key_(std::move(key)),
        recv_device_(std::move(recv_device)), type_(type),
        bf16_(wire_bf16 && type == dtype::f32), priority_(priority) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("_Send is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    tensor value = ctx.input(0).valid() ? ctx.input(0) : dead_marker(type_);
    // The step's top level: the key as it is; inside a loop, with the frame and iteration.
    std::string key = ctx.frame_iter().empty() ? key_ : key_ + ctx.frame_iter();
    if (process_)
      process_->send(ctx.step_id(), key, recv_device_, std::move(value), bf16_, priority_,
                     std::move(done));
    else
      r_.send(ctx.step_id(), key, recv_device_, std::move(value), bf16_, std::move(done));
  }

private:
  tensor_rendezvous& r_;
  process_rendezvous* process_;
  std::string key_, recv_device_;
  dtype type_;
  bool bf16_;
  int64_t priority_;
};

class recv_kernel : public kernel {
public:
  recv_kernel(tensor_rendezvous& r, std::string key, dtype type)
      : r_(r), key_(std::move(key)), type_(type) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("_Recv is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    auto got = [&ctx, type = type_, done = std::move(done)](status st, tensor t) {
      // A dead value stays an invalid output: the executor passes deadness on.
      if (st.ok() && t.type() == type)
        ctx.set_output(0, std::move(t));
      done(std::move(st));
    };
    if (ctx.frame_iter().empty())
      r_.recv(ctx.step_id(), key_, std::move(got));
    else
      r_.recv(ctx.step_id(), key_ + ctx.frame_iter(), std::move(got));
  }

private:
  tensor_rendezvous& r_;
  std::string key_;
  dtype type_;
};

/// A GPU's _Send: the value goes to the host first (device-to-host stream, after the kernel that
/// produced it), then on as a CPU's _Send sends it. GPU to GPU thus goes through the host.
class gpu_send_kernel : public kernel {
public:
  gpu_send_kernel(accelerator& gpu, std::unique_ptr<kernel> host_send)
      : gpu_(gpu), send_(std::move(host_send)) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("_Send is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    const tensor& v = ctx.input(0);
    if (!v.valid() || v.host_readable())
      return send_->compute_async(ctx, std::move(done));
    gpu_.copy_to_host(v, [this, &ctx, done = std::move(done)](status st, tensor host) mutable {
      if (!st.ok())
        return done(st);
      // The CPU _Send reads its input while it is called (the rendezvous keeps the tensor), so
      // a context of this call's own is enough.
      kernel_context host_ctx(std::span<const tensor>(&host, 1), 0, nullptr);
      host_ctx.set_step_id(ctx.step_id());
      host_ctx.set_frame_iter(ctx.frame_iter());
      send_->compute_async(host_ctx, std::move(done));
    });
  }

private:
  accelerator& gpu_;
  std::unique_ptr<kernel> send_;
};

/// A GPU's _Recv: the host value is copied into device memory (host-to-device stream) before the
/// node completes.
class gpu_recv_kernel : public kernel {
public:
  gpu_recv_kernel(accelerator& gpu, std::unique_ptr<kernel> host_recv, std::string node)
      : gpu_(gpu), recv_(std::move(host_recv)), node_(std::move(node)) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("_Recv is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    recv_->compute_async(ctx, [this, &ctx, done = std::move(done)](status st) mutable {
      const tensor& v = ctx.output(0);
      if (!st.ok() || !v.valid() || !v.host_readable() || v.type() == dtype::string)
        return done(st);
      gpu_.copy_to_device(v, node_, [&ctx, done = std::move(done)](status st, tensor dev) {
        if (st.ok())
          ctx.set_output(0, std::move(dev));
        done(st);
      });
    });
  }

private:
  accelerator& gpu_;
  std::unique_ptr<kernel> recv_;
  std::string node_;
};

} // namespace

void register_sendrecv_kernels(kernel_registry& reg) {
  reg.add("_Send", device_type::cpu, {},
          [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
            RUNNEL_ASSIGN_OR_RETURN(auto* r, rendezvous_of(c));
            return std::unique_ptr<kernel>(
                new send_kernel(*r, key_of(c), c.attr<std::string>("recv_device"),
                                c.attr<dtype>("T"), wire_bf16(c.node), send_priority(c.node)));
          });
  reg.add("_Recv", device_type::cpu, {},
          [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
            RUNNEL_ASSIGN_OR_RETURN(auto* r, rendezvous_of(c));
            return std::unique_ptr<kernel>(
                new recv_kernel(*r, key_of(c), c.attr<dtype>("tensor_type")));
          });
  reg.add("_Send", device_type::gpu, {},
          [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
            RUNNEL_ASSIGN_OR_RETURN(auto* r, rendezvous_of(c));
            if (!c.gpu)
              return failed_precondition("node '" + c.node.name + "': a GPU _Send without a GPU");
            return std::unique_ptr<kernel>(new gpu_send_kernel(
                *c.gpu, std::make_unique<send_kernel>(*r, key_of(c), c.attr<std::string>("recv_device"),
                                                      c.attr<dtype>("T"), wire_bf16(c.node),
                                                      send_priority(c.node))));
          });
  reg.add("_Recv", device_type::gpu, {},
          [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
            RUNNEL_ASSIGN_OR_RETURN(auto* r, rendezvous_of(c));
            if (!c.gpu)
              return failed_precondition("node '" + c.node.name + "': a GPU _Recv without a GPU");
            return std::unique_ptr<kernel>(new gpu_recv_kernel(
                *c.gpu, std::make_unique<recv_kernel>(*r, key_of(c), c.attr<dtype>("tensor_type")),
                c.node.name));
          });
}

} // namespace runnel
