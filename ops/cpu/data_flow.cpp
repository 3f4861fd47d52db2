// Kernels of the queue and iterator ops. Each finds its resource when it is built (the queue node
// it is connected to names the queue) and then talks to it asynchronously: a blocked enqueue or
// dequeue holds no thread, only a pending request at the queue's actor.
#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/kernel/queue.hpp"

#include <algorithm>

namespace runnel {

std::string resource_name(const node& n) {
  auto shared = find_attr<std::string>(n.attrs, "shared_name");
  return shared && !shared->empty() ? *shared : n.name;
}

result<std::shared_ptr<queue_resource>> queue_of_node(const kernel_construction& c, const node& q) {
  auto spec = queue_spec::from_node_attrs(q.op, q.attrs);
  if (!spec)
    return spec.error();
  if (!c.resources)
    return failed_precondition("no resources on this device");
  return c.resources->find_or_create_queue(resource_name(q), *spec);
}

result<std::shared_ptr<queue_resource>> input_queue(const kernel_construction& c, size_t i) {
  const node& producer = c.graph.at(c.node.inputs.at(i).node);
  if (!queue_spec::from_node_attrs(producer.op, producer.attrs))
    return invalid_argument("input " + std::to_string(i) +
                            " must come from a queue op, but comes from '" + producer.name +
                            "' (op " + producer.op + ")");
  return queue_of_node(c, producer);
}

namespace {

class bucket_enqueue_kernel : public kernel {
public:
  bucket_enqueue_kernel(std::vector<std::shared_ptr<queue_resource>> qs,
                        std::vector<int64_t> boundaries, int64_t timeout_ms)
      : queues_(std::move(qs)), boundaries_(std::move(boundaries)), timeout_ms_(timeout_ms) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("enqueue is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    const tensor& len = ctx.input(0);
    if (len.rank() != 0)
      return done(
          invalid_argument("length must be a scalar, got shape " + len.shape().to_string()));
    int64_t l = *len.data<int64_t>();
    size_t b =
        size_t(std::upper_bound(boundaries_.begin(), boundaries_.end(), l) - boundaries_.begin());
    auto in = ctx.inputs();
    size_t first = 1 + queues_.size();
    queues_[b]->enqueue(std::vector<tensor>(in.begin() + long(first), in.end()), false, timeout_ms_,
                        std::move(done));
  }

private:
  std::vector<std::shared_ptr<queue_resource>> queues_;
  std::vector<int64_t> boundaries_;
  int64_t timeout_ms_;
};

class queue_kernel : public kernel {
public:
  explicit queue_kernel(std::shared_ptr<queue_resource> q) : q_(std::move(q)) {}
  status compute(kernel_context& ctx) override {
    ctx.set_output(0, tensor::scalar<std::string>(q_->name()));
    return {};
  }

private:
  std::shared_ptr<queue_resource> q_;
};

class enqueue_kernel : public kernel {
public:
  enqueue_kernel(std::shared_ptr<queue_resource> q, bool many, int64_t timeout_ms)
      : q_(std::move(q)), many_(many), timeout_ms_(timeout_ms) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("enqueue is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    auto in = ctx.inputs();
    q_->enqueue(std::vector<tensor>(in.begin() + 1, in.end()), many_, timeout_ms_, std::move(done));
  }

private:
  std::shared_ptr<queue_resource> q_;
  bool many_;
  int64_t timeout_ms_;
};

class dequeue_kernel : public kernel {
public:
  dequeue_kernel(std::shared_ptr<queue_resource> q, dequeue_mode mode, int64_t timeout_ms)
      : q_(std::move(q)), mode_(mode), timeout_ms_(timeout_ms) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("dequeue is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    int64_t n = 1;
    if (mode_ != dequeue_mode::one) {
      const tensor& t = ctx.input(1);
      if (t.rank() != 0 || t.type() != dtype::i32)
        return done(invalid_argument("n must be an int32 scalar, got " + t.to_string()));
      n = *t.data<int32_t>();
      if (n < 0)
        return done(invalid_argument("n must be >= 0, got " + std::to_string(n)));
    }
    q_->dequeue(n, mode_, timeout_ms_,
                [this, &ctx, done = std::move(done)](status st, std::vector<tensor> out) {
                  // Exactly once: an aborted step's elements go back to the queue.
                  finish_wait(
                      ctx, std::move(st), std::move(out),
                      [this](std::vector<tensor> o) { q_->put_back(std::move(o), mode_); }, done);
                });
  }

private:
  std::shared_ptr<queue_resource> q_;
  dequeue_mode mode_;
  int64_t timeout_ms_;
};

class close_kernel : public kernel {
public:
  close_kernel(std::shared_ptr<queue_resource> q, bool cancel)
      : q_(std::move(q)), cancel_(cancel) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("close is asynchronous"); }
  void compute_async(kernel_context&, std::function<void(status)> done) override {
    q_->close(cancel_, std::move(done));
  }

private:
  std::shared_ptr<queue_resource> q_;
  bool cancel_;
};

class size_kernel : public kernel {
public:
  explicit size_kernel(std::shared_ptr<queue_resource> q) : q_(std::move(q)) {}
  status compute(kernel_context& ctx) override {
    ctx.set_output(0, tensor::scalar<int32_t>(int32_t(q_->size())));
    return {};
  }

private:
  std::shared_ptr<queue_resource> q_;
};

class get_next_kernel : public kernel {
public:
  get_next_kernel(std::shared_ptr<iterator_resource> it, std::vector<dtype> types)
      : it_(std::move(it)), types_(std::move(types)) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("get_next is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    it_->get_next([this, &ctx, done = std::move(done)](status st, std::vector<tensor> out) {
      if (st.ok() && ctx.step_aborted()) {
        it_->put_back(std::move(out));
        return done(cancelled("the step was aborted"));
      }
      if (st.ok()) {
        if (out.size() != types_.size())
          st = invalid_argument("the dataset of iterator '" + it_->name() + "' gives " +
                                std::to_string(out.size()) + " components but the node has " +
                                std::to_string(types_.size()));
        for (size_t i = 0; st.ok() && i < out.size(); ++i)
          if (out[i].type() != types_[i])
            st = invalid_argument("component " + std::to_string(i) + " of iterator '" +
                                  it_->name() + "' is " + std::string(name(out[i].type())) +
                                  " but the node expects " + std::string(name(types_[i])));
        for (size_t i = 0; st.ok() && i < out.size(); ++i)
          ctx.set_output(int(i), std::move(out[i]));
      }
      done(std::move(st));
    });
  }

private:
  std::shared_ptr<iterator_resource> it_;
  std::vector<dtype> types_;
};

kernel_factory queue_factory() {
  return [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
    auto q = queue_of_node(c, c.node);
    if (!q)
      return q.error();
    return std::unique_ptr<kernel>(std::make_unique<queue_kernel>(*q));
  };
}

status check_components(const kernel_construction& c, const queue_resource& q, const char* attr) {
  auto types = c.attr<std::vector<dtype>>(attr);
  if (types != q.spec().types) {
    auto list = [](const std::vector<dtype>& ts) {
      std::string s;
      for (auto t : ts)
        s += (s.empty() ? "" : ", ") + std::string(name(t));
      return "(" + s + ")";
    };
    return invalid_argument("components " + list(types) + " do not match queue '" + q.name() +
                            "', which holds " + list(q.spec().types));
  }
  return {};
}

} // namespace

RUNNEL_KERNEL_FAMILY(data_flow) {
  auto cpu = device_type::cpu;
  for (auto op : {"FIFOQueueV2", "RandomShuffleQueueV2", "PaddingFIFOQueueV2", "PriorityQueueV2"})
    reg.add(op, cpu, {}, queue_factory());
  for (bool many : {false, true})
    reg.add(many ? "QueueEnqueueManyV2" : "QueueEnqueueV2", cpu, {},
            [many](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
              auto q = input_queue(c);
              if (!q)
                return q.error();
              if (auto st = check_components(c, **q, "Tcomponents"); !st.ok())
                return st;
              return std::unique_ptr<kernel>(
                  std::make_unique<enqueue_kernel>(*q, many, c.attr<int64_t>("timeout_ms")));
            });
  for (auto entry : {std::pair{"QueueDequeueV2", dequeue_mode::one},
                     std::pair{"QueueDequeueManyV2", dequeue_mode::many},
                     std::pair{"QueueDequeueUpToV2", dequeue_mode::up_to}}) {
    dequeue_mode mode = entry.second;
    reg.add(entry.first, cpu, {},
            [mode](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
              auto q = input_queue(c);
              if (!q)
                return q.error();
              if (auto st = check_components(c, **q, "component_types"); !st.ok())
                return st;
              return std::unique_ptr<kernel>(
                  std::make_unique<dequeue_kernel>(*q, mode, c.attr<int64_t>("timeout_ms")));
            });
  }
  reg.add("BucketEnqueue", cpu, {},
          [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
            auto n = size_t(c.attr<int64_t>("N"));
            auto boundaries = c.attr<std::vector<int64_t>>("boundaries");
            if (n != boundaries.size() + 1)
              return invalid_argument(std::to_string(boundaries.size()) + " boundaries need " +
                                      std::to_string(boundaries.size() + 1) + " queues, got " +
                                      std::to_string(n));
            std::vector<std::shared_ptr<queue_resource>> qs;
            for (size_t i = 0; i < n; ++i) {
              auto q = input_queue(c, 1 + i);
              if (!q)
                return q.error();
              qs.push_back(*q);
            }
            return std::unique_ptr<kernel>(std::make_unique<bucket_enqueue_kernel>(
                std::move(qs), std::move(boundaries), c.attr<int64_t>("timeout_ms")));
          });
  reg.add("QueueCloseV2", cpu, {},
          [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
            auto q = input_queue(c);
            if (!q)
              return q.error();
            return std::unique_ptr<kernel>(
                std::make_unique<close_kernel>(*q, c.attr<bool>("cancel_pending_enqueues")));
          });
  reg.add("QueueSizeV2", cpu, {},
          [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
            auto q = input_queue(c);
            if (!q)
              return q.error();
            return std::unique_ptr<kernel>(std::make_unique<size_kernel>(*q));
          });
  reg.add("IteratorGetNext", cpu, {},
          [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
            if (!c.resources)
              return failed_precondition("no resources on this device");
            auto it = c.resources->find_or_create_iterator(resource_name(c.node));
            if (!it)
              return it.error();
            return std::unique_ptr<kernel>(
                std::make_unique<get_next_kernel>(*it, c.attr<std::vector<dtype>>("output_types")));
          });
}

} // namespace runnel
