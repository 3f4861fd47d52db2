// Device actors and variable actors.
#include "runnel/actors/exec/internal.hpp"

namespace runnel {
/// A variable whose updates run at its own actor, one at a time.
class actor_variable : public variable, public std::enable_shared_from_this<actor_variable> {
public:
  actor_variable(std::string name, dtype type, shape s)
      : variable(std::move(name), type, std::move(s)) {}
  ~actor_variable() override {
    if (actor_)
      caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
  }
  void start(caf::actor_system& sys);
  void update(update_fn fn, done_fn done) override {
    auto req = std::make_shared<update_request>();
    // The request keeps the variable alive until the actor has applied it.
    req->fn = [self = shared_from_this(), fn = std::move(fn)](state& s) { return fn(s); };
    req->done = std::move(done);
    caf::anon_send(actor_, update_atom::value, std::move(req));
  }
  std::pair<status, tensor> run_update(const update_fn& fn) { return apply(fn); }

private:
  variable_actor actor_;
};

static variable_actor::behavior_type variable_behavior(variable_actor::pointer, actor_variable* var) {
  return {
      [var](update_atom, update_request_ptr& req) {
        // The update's captures (the value it assigns, perhaps a fed loan) go before `done` can
        // end the step: its caller may count on them being given back when run() returns.
        auto fn = std::move(req->fn);
        auto [st, value] = var->run_update(fn);
        fn = nullptr;
        req->done(std::move(st), std::move(value));
      },
  };
}

void actor_variable::start(caf::actor_system& sys) {
  actor_ = sys.spawn(variable_behavior, this);
}

result<std::shared_ptr<variable>> device_resources::find_or_create_variable(const std::string& name,
                                                                          dtype type,
                                                                          const shape& s) {
  std::lock_guard lock(mu_);
  auto it = variables_.find(name);
  if (it != variables_.end()) {
    auto& v = it->second;
    if (v->type() != type || !v->declared_shape().is_compatible_with(s))
      return invalid_argument("variable " + name + " already exists as " +
                              std::string(runnel::name(v->type())) +
                              v->declared_shape().to_string() + "; it cannot be used as " +
                              std::string(runnel::name(type)) + s.to_string());
    return std::shared_ptr<variable>(v);
  }
  auto v = std::make_shared<actor_variable>(name, type, s);
  if (gpu_)
    v->set_device_reader([gpu = gpu_](const tensor& t) { return gpu->read_to_host(t); });
  v->start(sys_);
  variables_.emplace(name, v);
  return std::shared_ptr<variable>(v);
}

result<std::shared_ptr<queue_resource>>
device_resources::find_or_create_queue(const std::string& name, const queue_spec& spec) {
  std::lock_guard lock(mu_);
  auto it = queues_.find(name);
  if (it != queues_.end()) {
    if (!(it->second->spec() == spec))
      return invalid_argument("queue '" + name + "' already exists as a " +
                              to_string(it->second->spec().kind) +
                              " with other component types, shapes or options; give the new "
                              "queue another name (or shared_name)");
    return it->second;
  }
  if (!providers().queue)
    return missing_provider("queues", "actors/state/queue.cpp");
  auto q = providers().queue(sys_, name, spec);
  queues_.emplace(name, q);
  return q;
}

result<std::shared_ptr<accumulator_resource>>
device_resources::find_or_create_accumulator(const std::string& name, const accumulator_spec& spec) {
  std::lock_guard lock(mu_);
  auto it = accumulators_.find(name);
  if (it != accumulators_.end()) {
    if (!(it->second->spec() == spec))
      return invalid_argument("accumulator '" + name + "' already exists as " +
                              it->second->spec().to_string() + "; this graph asks for " +
                              spec.to_string() +
                              ". Do all workers run the same model with the same "
                              "total_num_replicas?");
    return it->second;
  }
  if (!providers().accumulator)
    return missing_provider("accumulators", "actors/state/accumulator.cpp");
  auto a = providers().accumulator(sys_, name, spec);
  accumulators_.emplace(name, a);
  return a;
}

result<std::shared_ptr<iterator_resource>>
device_resources::find_or_create_iterator(const std::string& name) {
  if (iterator_home_)
    return iterator_home_->find_or_create_iterator(name); // iterators are runtime-wide
  std::lock_guard lock(mu_);
  auto it = iterators_.find(name);
  if (it != iterators_.end())
    return it->second;
  if (!providers().iterator)
    return missing_provider("dataset iterators", "actors/data/iterator.cpp");
  auto r = providers().iterator(sys_, name);
  iterators_.emplace(name, r);
  return r;
}

void device_resources::gauges(
    std::vector<std::pair<std::string, int64_t>>& queue_sizes,
    std::vector<std::pair<std::string, accumulator_resource::stats>>& accumulators) {
  std::lock_guard lock(mu_);
  for (auto& [name, q] : queues_)
    queue_sizes.emplace_back(name, q->size());
  for (auto& [name, a] : accumulators_)
    accumulators.emplace_back(name, a->get_stats());
}

void device_resources::clear() {
  std::lock_guard lock(mu_);
  variables_.clear();
  queues_.clear();
  iterators_.clear();
  accumulators_.clear();
}

namespace {

device_actor::behavior_type device_behavior(device_actor::pointer self, local_device* dev) {
  return {
      [self, dev](spawn_atom, spawn_request_ptr& req) -> status {
        auto& kernels = runtime_kernels();
        std::vector<std::shared_ptr<node_setup>> setups;
        for (size_t i = 0; i < req->node_ids.size(); ++i) {
          const node& n = req->g->at(req->node_ids[i]);
          kernel_construction c{n,
                                *req->g,
                                dev->type,
                                dev->cpu.get(),
                                dev->resources.get(),
                                req->output_value_needed[i],
                                dev->gpu.get()};
          auto factory = kernels.find(n, dev->type);
          if (!factory)
            return factory.error().with_context("on device " + dev->name);
          auto k = (**factory)(c);
          if (!k)
            return k.error().with_context("node '" + n.name + "' (op " + n.op + ")");
          auto setup = std::make_shared<node_setup>();
          setup->name = n.name;
          setup->op = n.op;
          setup->kern = std::move(k).value();
          setup->reentrant = setup->kern->reentrant();
          setup->cpu = dev->cpu.get();
          setup->gpu = dev->gpu.get();
          setup->num_outputs = n.num_outputs();
          setup->device = dev->name;
          // Expensive kernels run on the device's executor when it has one. Stateful kernels
          // (random generators, variables, queues) stay on their actor: their computes must not
          // overlap, and an actor runs one message at a time.
          if (dev->executor && !setup->kern->is_async() && !is_metadata_op(n.op)) {
            auto* def = req->g->ops().find(n.op);
            if (def && !def->stateful)
              setup->executor = dev->executor.get();
          }
          setups.push_back(std::move(setup));
        }
        for (auto& s : setups)
          req->actors.push_back(self->spawn(node_behavior, s));
        req->setups = std::move(setups);
        return {};
      },
      [dev](clear_atom) { dev->resources->clear(); },
  };
}

} // namespace

device_actor spawn_device_actor(caf::actor_system& sys, local_device& dev) {
  return sys.spawn(device_behavior, &dev);
}

} // namespace runnel
