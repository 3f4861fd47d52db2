// Kernels of the gradient accumulator ops and of QueueReset/QueueFail. Each finds its resource
// when it is built (the accumulator or queue node it is connected to names it); a take waits
// asynchronously, holding no thread.
#include "runnel/ops/kernel/accumulator.hpp"
#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/kernel/queue.hpp"

namespace runnel {
namespace {

result<std::shared_ptr<accumulator_resource>> accumulator_of_node(const kernel_construction& c,
                                                                  const node& a) {
  auto spec = accumulator_spec::from_node_attrs(a.op, a.attrs);
  if (!spec)
    return spec.error();
  if (!c.resources)
    return failed_precondition("no resources on this device");
  return c.resources->find_or_create_accumulator(resource_name(a), *spec);
}

/// The accumulator behind input 0 of the node being built; `sparse` as the op needs.
result<std::shared_ptr<accumulator_resource>> input_accumulator(const kernel_construction& c,
                                                                std::optional<bool> sparse = {}) {
  const node& producer = c.graph.at(c.node.inputs.at(0).node);
  auto spec = accumulator_spec::from_node_attrs(producer.op, producer.attrs);
  if (!spec)
    return invalid_argument("input 0 must come from an accumulator, but comes from '" +
                            producer.name + "' (op " + producer.op + ")");
  if (sparse && spec->sparse != *sparse)
    return invalid_argument("'" + producer.name + "' is a " +
                            (spec->sparse ? "sparse" : "dense") + " accumulator; " + c.node.op +
                            " needs a " + (*sparse ? "sparse" : "dense") + " one");
  return accumulator_of_node(c, producer);
}

result<int64_t> step_input(const tensor& t) {
  if (t.type() != dtype::i64 || t.rank() != 0)
    return invalid_argument("local_step must be an int64 scalar, got " + t.to_string());
  return *t.data<int64_t>();
}

class handle_kernel : public kernel {
public:
  explicit handle_kernel(std::string name) : name_(std::move(name)) {}
  status compute(kernel_context& ctx) override {
    ctx.set_output(0, tensor::scalar<std::string>(name_));
    return {};
  }

private:
  std::string name_;
};

class apply_kernel : public kernel {
public:
  apply_kernel(std::shared_ptr<accumulator_resource> a, int64_t replica)
      : a_(std::move(a)), replica_(replica) {}
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(int64_t step, step_input(ctx.input(1)));
    auto in = ctx.inputs();
    return a_->apply(step, replica_, std::vector<tensor>(in.begin() + 2, in.end()));
  }

private:
  std::shared_ptr<accumulator_resource> a_;
  int64_t replica_;
};

class take_kernel : public kernel {
public:
  explicit take_kernel(std::shared_ptr<accumulator_resource> a) : a_(std::move(a)) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("take is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    const tensor& n = ctx.input(1);
    if (n.type() != dtype::i32 || n.rank() != 0)
      return done(invalid_argument("num_required must be an int32 scalar, got " + n.to_string()));
    int64_t count = *n.data<int32_t>();
    a_->take(count, [this, &ctx, count, done = std::move(done)](status st,
                                                                 std::vector<tensor> out) {
      // Nobody will apply what an aborted step took: keep it for the next take.
      finish_wait(ctx, std::move(st), std::move(out),
                  [this, count](std::vector<tensor> o) { a_->put_back(std::move(o), count); },
                  done);
    });
  }

private:
  std::shared_ptr<accumulator_resource> a_;
};

enum class stat { accumulated, dropped, refused };

class stat_kernel : public kernel {
public:
  stat_kernel(std::shared_ptr<accumulator_resource> a, stat which)
      : a_(std::move(a)), which_(which) {}
  status compute(kernel_context& ctx) override {
    auto s = a_->get_stats();
    if (which_ == stat::accumulated)
      ctx.set_output(0, tensor::scalar<int32_t>(int32_t(s.accumulated)));
    else
      ctx.set_output(0, tensor::scalar<int64_t>(which_ == stat::dropped ? s.dropped : s.refused));
    return {};
  }

private:
  std::shared_ptr<accumulator_resource> a_;
  stat which_;
};

class set_step_kernel : public kernel {
public:
  explicit set_step_kernel(std::shared_ptr<accumulator_resource> a) : a_(std::move(a)) {}
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(int64_t step, step_input(ctx.input(1)));
    a_->set_global_step(step);
    return {};
  }

private:
  std::shared_ptr<accumulator_resource> a_;
};

class close_accumulator_kernel : public kernel {
public:
  explicit close_accumulator_kernel(std::shared_ptr<accumulator_resource> a) : a_(std::move(a)) {}
  status compute(kernel_context&) override {
    a_->close();
    return {};
  }

private:
  std::shared_ptr<accumulator_resource> a_;
};

class reset_queue_kernel : public kernel {
public:
  explicit reset_queue_kernel(std::shared_ptr<queue_resource> q) : q_(std::move(q)) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("reset is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    auto in = ctx.inputs();
    q_->reset(std::vector<tensor>(in.begin() + 1, in.end()), std::move(done));
  }

private:
  std::shared_ptr<queue_resource> q_;
};

class fail_queue_kernel : public kernel {
public:
  fail_queue_kernel(std::shared_ptr<queue_resource> q, int64_t code)
      : q_(std::move(q)), code_(error_code(code)) {}
  status compute(kernel_context& ctx) override {
    const tensor& m = ctx.input(1);
    if (m.type() != dtype::string || m.rank() != 0)
      return invalid_argument("message must be a string scalar, got " + m.to_string());
    q_->fail(status(code_, *m.data<std::string>()));
    return {};
  }

private:
  std::shared_ptr<queue_resource> q_;
  error_code code_;
};

template <class K, class... Args>
kernel_factory accumulator_factory(std::optional<bool> sparse, Args... args) {
  return [=](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
    auto a = input_accumulator(c, sparse);
    if (!a)
      return a.error();
    return std::unique_ptr<kernel>(std::make_unique<K>(*a, args...));
  };
}

} // namespace

RUNNEL_KERNEL_FAMILY(accumulator) {
  auto cpu = device_type::cpu;
  for (auto op : {"ConditionalAccumulator", "SparseConditionalAccumulator"})
    reg.add(op, cpu, {}, [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
      auto a = accumulator_of_node(c, c.node);
      if (!a)
        return a.error();
      return std::unique_ptr<kernel>(std::make_unique<handle_kernel>((*a)->name()));
    });
  for (bool sparse : {false, true})
    reg.add(sparse ? "SparseAccumulatorApplyGradient" : "AccumulatorApplyGradient", cpu, {},
            [sparse](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
              auto a = input_accumulator(c, sparse);
              if (!a)
                return a.error();
              return std::unique_ptr<kernel>(
                  std::make_unique<apply_kernel>(*a, c.attr<int64_t>("replica")));
            });
  reg.add("AccumulatorTakeGradient", cpu, {}, accumulator_factory<take_kernel>(false));
  reg.add("SparseAccumulatorTakeGradient", cpu, {}, accumulator_factory<take_kernel>(true));
  reg.add("AccumulatorNumAccumulated", cpu, {},
          accumulator_factory<stat_kernel>({}, stat::accumulated));
  reg.add("AccumulatorNumDropped", cpu, {}, accumulator_factory<stat_kernel>({}, stat::dropped));
  reg.add("AccumulatorNumRefused", cpu, {}, accumulator_factory<stat_kernel>({}, stat::refused));
  reg.add("AccumulatorSetGlobalStep", cpu, {}, accumulator_factory<set_step_kernel>({}));
  reg.add("AccumulatorClose", cpu, {}, accumulator_factory<close_accumulator_kernel>({}));
  reg.add("QueueReset", cpu, {}, [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
    auto q = input_queue(c);
    if (!q)
      return q.error();
    return std::unique_ptr<kernel>(std::make_unique<reset_queue_kernel>(*q));
  });
  reg.add("QueueFail", cpu, {}, [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
    auto q = input_queue(c);
    if (!q)
      return q.error();
    return std::unique_ptr<kernel>(std::make_unique<fail_queue_kernel>(*q, c.attr<int64_t>("code")));
  });
}

} // namespace runnel
