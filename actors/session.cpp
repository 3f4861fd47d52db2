#include "actors/session.hpp"

#include <cstdio>
#include <map>
#include <semaphore>
#include <unordered_map>

#include "actors/flow.hpp"
#include "placement/cost_model.hpp"
#include "placement/partition.hpp"
#include "placement/placer.hpp"

namespace runnel {
namespace {

/// One instantiated signature: its node actors and how a step is started.
struct instance {
  std::shared_ptr<instance_actors> actors;
  std::vector<std::vector<consumer>> feed_consumers; ///< per feed
  std::vector<node_actor> sources;                   ///< nodes with no inputs at all
  std::vector<int> fed_fetches;                      ///< per fetch: feed index, or -1
  int num_nodes = 0;
  bool uses_rendezvous = false; ///< some edge crosses devices, or it has _Send/_Recv nodes
  /// With control flow: the frames; the instance's messages carry flow tags.
  std::shared_ptr<const flow_plan> flow;
  std::unique_ptr<std::counting_semaphore<4096>> in_flight;
};

struct signature_hash {
  size_t operator()(const std::vector<int64_t>& v) const {
    size_t h = 1469598103934665603ull;
    for (auto x : v)
      h = (h ^ size_t(x)) * 1099511628211ull;
    return h;
  }
};

int64_t encode(endpoint e) {
  return (int64_t(e.node) << 16) | e.index;
}

/// The runtime's devices for the placer, in priority order.
std::vector<placement_device> placement_devices(const runtime::impl& rt) {
  std::vector<std::string> names;
  for (auto& d : rt.devices)
    names.push_back(d.name);
  return placement_devices_from(names);
}

/// Waits (asynchronously) for its key's tensor of the step.
class recv_kernel : public kernel {
public:
  recv_kernel(local_rendezvous& r, std::string key) : r_(r), key_(std::move(key)) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("recv is asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    r_.recv(ctx.step_id(), key_, [&ctx, done = std::move(done)](status st, tensor t) {
      if (st.ok())
        ctx.set_output(0, std::move(t));
      done(std::move(st));
    });
  }

private:
  local_rendezvous& r_;
  std::string key_;
};

} // namespace

/// Guards cost models that sessions share (session_options::costs) while placing and learning.
std::mutex shared_costs_mu;

struct session::impl {
  runtime::impl& rt;
  const graph& g;
  session_options options;
  std::mutex mu; // guards instances_ and closed
  std::unordered_map<std::vector<int64_t>, std::shared_ptr<instance>, signature_hash> instances;
  bool closed = false;
  std::mutex active_mu;
  std::condition_variable active_cv;
  int active = 0;

  /// The device of each node of `g` (placed when a build first sees the graph at its size).
  std::vector<size_t> device_of_node;

  impl(runtime::impl& r, const graph& graph, session_options o) : rt(r), g(graph), options(o) {}

  /// Places the nodes added since the last placement (all of them the first time); nodes placed
  /// before keep their device, and new members of their colocation groups follow them.
  status place_graph() {
    int n = g.num_nodes();
    if (size_t(n) == device_of_node.size())
      return {};
    auto all = all_nodes(g);
    auto& kernels = runtime_kernels();
    auto has_kernel = [&](const node& nd, const std::string& type) {
      return kernels.has_kernel(nd, type == "GPU" ? device_type::gpu : device_type::cpu);
    };
    auto devices = placement_devices(rt);
    placement_options popts{.allow_soft_placement = options.allow_soft_placement};
    std::vector<size_t> where;
    if (options.placement == session_options::placement_policy::cost_model) {
      std::vector<device_params> params(devices.size(), resolve_cpu_params(rt));
      std::lock_guard costs_lock(shared_costs_mu);
      cost_model estimates_only;
      const cost_model& costs = options.costs ? *options.costs : estimates_only;
      RUNNEL_ASSIGN_OR_RETURN(auto p,
                              place_greedy(g, all, devices, params, costs, has_kernel, popts));
      if (options.trace_placement)
        std::fprintf(stderr, "%s", p.explain(g, all, devices).c_str());
      where = std::move(p.device);
    } else {
      RUNNEL_ASSIGN_OR_RETURN(where, place_simple(g, all, devices, has_kernel, popts));
    }
    size_t old = device_of_node.size();
    if (old > 0) {
      auto groups = colocation_groups(g, all);
      std::unordered_map<int, size_t> kept;
      for (size_t v = 0; v < old; ++v) {
        where[v] = device_of_node[v];
        kept.emplace(groups[v], device_of_node[v]);
      }
      for (size_t v = old; v < where.size(); ++v)
        if (auto it = kept.find(groups[v]); it != kept.end())
          where[v] = it->second;
    }
    device_of_node = std::move(where);
    return {};
  }

  result<std::shared_ptr<instance>> build(const std::vector<endpoint>& feeds,
                                          const std::vector<endpoint>& fetches,
                                          const std::vector<int>& targets);
  result<step_ptr> start(const feed_list& feeds, const std::vector<output>& fetches,
                         const std::vector<operation>& targets,
                         std::function<void(step_state&)> extra_finish,
                         std::shared_ptr<trace_buffer> trace = nullptr, int64_t step_id = 0);
  void stop_instances();
};

result<std::shared_ptr<instance>> session::impl::build(const std::vector<endpoint>& feeds,
                                                       const std::vector<endpoint>& fetches,
                                                       const std::vector<int>& targets) {
  int n = g.num_nodes();
  auto is_fed = [&](endpoint e) { return std::find(feeds.begin(), feeds.end(), e) != feeds.end(); };
  // Prune: walk back from fetches and targets, stopping at fed tensors.
  std::vector<char> needed(static_cast<size_t>(n), 0);
  std::vector<int> stack;
  for (auto e : fetches)
    if (!is_fed(e))
      stack.push_back(e.node);
  for (int t : targets)
    stack.push_back(t);
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (needed[size_t(v)])
      continue;
    needed[size_t(v)] = 1;
    auto& nd = g.at(v);
    for (auto e : nd.inputs)
      if (!is_fed(e))
        stack.push_back(e.node);
    for (int c : nd.control_inputs)
      stack.push_back(c);
  }
  // A needed placeholder must be fed.
  for (int v = 0; v < n; ++v)
    if (needed[size_t(v)] && g.at(v).op == "Placeholder") {
      auto& p = g.at(v);
      return invalid_argument("you must feed a value for placeholder '" + p.name + "' with dtype " +
                              std::string(name(p.output_types[0])) + " and shape " +
                              p.output_shapes[0].to_string());
    }

  // Which outputs are read by value (not only through ref inputs or not at all).
  std::vector<std::vector<bool>> value_needed(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v)
    value_needed[size_t(v)].assign(size_t(g.at(v).num_outputs()), false);
  for (int v = 0; v < n; ++v) {
    if (!needed[size_t(v)])
      continue;
    auto& nd = g.at(v);
    auto refs = ref_input_slots(nd);
    for (size_t k = 0; k < nd.inputs.size(); ++k) {
      auto e = nd.inputs[k];
      // Consumers of a variable read it themselves; the variable node only passes a token.
      if (!refs[k] && g.at(e.node).op != "VariableV2")
        value_needed[size_t(e.node)][size_t(e.index)] = true;
    }
  }
  for (auto e : fetches)
    value_needed[size_t(e.node)][size_t(e.index)] = true;

  // Constants are bound into their consumers at instantiation: no message per step. A Const
  // still becomes a node when it is fetched, a target, or something waits on it.
  std::vector<char> bindable(static_cast<size_t>(n), 0), instantiate(static_cast<size_t>(n), 0);
  std::vector<char> keep(static_cast<size_t>(n), 0);
  for (auto e : fetches)
    keep[size_t(e.node)] = 1;
  for (int t : targets)
    keep[size_t(t)] = 1;
  for (int v = 0; v < n; ++v)
    if (needed[size_t(v)])
      for (int c : g.at(v).control_inputs)
        keep[size_t(c)] = 1;
  for (int v = 0; v < n; ++v)
    bindable[size_t(v)] =
        needed[size_t(v)] && g.at(v).op == "Const" && g.at(v).control_inputs.empty();
  // In a loop or branch a Const waits on the context's pivot, so that it runs once per
  // iteration or branch taken. Bound into a consumer that reads the pivot itself, it changes
  // nothing (the consumer is dead exactly when the pivot is) and saves a firing per iteration.
  bool any_flow = false;
  for (int v = 0; v < n; ++v)
    any_flow |= needed[size_t(v)] && is_control_flow_op(g.at(v).op);
  if (any_flow) {
    std::vector<std::vector<int>> readers(static_cast<size_t>(n));
    for (int v = 0; v < n; ++v)
      if (needed[size_t(v)])
        for (auto e : g.at(v).inputs)
          readers[size_t(e.node)].push_back(v);
    for (int v = 0; v < n; ++v) {
      const node& c = g.at(v);
      if (!needed[size_t(v)] || c.op != "Const" || c.control_inputs.size() != 1 ||
          readers[size_t(v)].empty())
        continue;
      int pivot = c.control_inputs[0];
      bool all = true;
      for (int m : readers[size_t(v)]) {
        const node& r = g.at(m);
        all &= !is_control_flow_op(r.op) &&
               std::any_of(r.inputs.begin(), r.inputs.end(), [&](endpoint e) {
                 return e.node == pivot && !is_fed(e);
               });
      }
      bindable[size_t(v)] = all;
    }
  }
  for (int v = 0; v < n; ++v)
    instantiate[size_t(v)] = needed[size_t(v)] && (!bindable[size_t(v)] || keep[size_t(v)]);

  // Place the whole graph (once per graph size), so that every instance agrees on where
  // stateful nodes live; then spawn node actors device by device.
  RUNNEL_RETURN_IF_ERROR(place_graph());
  // With control flow, an Identity or LoopCond (a pass-through: loop bodies and branches are
  // full of them) is no node of its own: its consumers, control consumers included, take its
  // input from its producer directly, with the same frame, iteration and deadness. One firing
  // less per loop variable and iteration.
  std::vector<char> elided(static_cast<size_t>(n), 0);
  if (any_flow)
    for (int v = 0; v < n; ++v) {
      const node& nd = g.at(v);
      if (!needed[size_t(v)] || keep[size_t(v)] || (nd.op != "Identity" && nd.op != "LoopCond") ||
          nd.inputs.size() != 1 || !nd.control_inputs.empty())
        continue;
      auto e = nd.inputs[0];
      if (is_fed(e) || bindable[size_t(e.node)] || g.at(e.node).op == "VariableV2" ||
          device_of_node[size_t(e.node)] != device_of_node[size_t(v)])
        continue;
      elided[size_t(v)] = 1;
      instantiate[size_t(v)] = 0;
    }
  // What an elided node's consumers read instead.
  auto through = [&](endpoint e) {
    while (elided[size_t(e.node)])
      e = g.at(e.node).inputs[0];
    return e;
  };
  std::vector<int> placed;
  std::vector<size_t> where;
  for (int v = 0; v < n; ++v)
    if (instantiate[size_t(v)]) {
      placed.push_back(v);
      where.push_back(device_of_node[size_t(v)]);
    }
  std::vector<std::vector<int>> by_device(rt.devices.size());
  for (size_t i = 0; i < placed.size(); ++i)
    by_device[where[i]].push_back(placed[i]);
  std::vector<std::shared_ptr<node_setup>> setups(static_cast<size_t>(n));
  std::vector<node_actor> actors(static_cast<size_t>(n));
  auto inst = std::make_shared<instance>();
  inst->actors = std::make_shared<instance_actors>();
  bool dynamic = false;
  for (int v : placed)
    dynamic |= is_control_flow_op(g.at(v).op);
  for (int v : placed)
    if (g.at(v).op == "_Send" || g.at(v).op == "_Recv")
      inst->uses_rendezvous = true; // a partition of a cluster's graph (plan_frames refuses
                                    // Sends and Recvs inside a loop)
  {
    caf::scoped_actor self(*rt.system);
    for (size_t d = 0; d < by_device.size(); ++d) {
      if (by_device[d].empty())
        continue;
      auto req = std::make_shared<spawn_request>();
      req->g = &g;
      req->node_ids = by_device[d];
      for (int v : by_device[d])
        req->output_value_needed.push_back(value_needed[size_t(v)]);
      status result = internal_error("no reply from device " + rt.devices[d].name);
      self->request(rt.devices[d].actor, caf::infinite, spawn_atom::value, req)
          .receive([&](status s) { result = std::move(s); },
                   [&](caf::error& e) {
                     result = internal_error("device " + rt.devices[d].name +
                                             " failed: " + rt.system->render(e));
                   });
      if (!result.ok()) {
        for (auto& a : req->actors)
          self->send_exit(a, caf::exit_reason::user_shutdown);
        for (auto& a : inst->actors->nodes)
          self->send_exit(a, caf::exit_reason::user_shutdown);
        return result;
      }
      for (size_t i = 0; i < by_device[d].size(); ++i) {
        setups[size_t(by_device[d][i])] = req->setups[i];
        actors[size_t(by_device[d][i])] = req->actors[i];
        inst->actors->nodes.push_back(req->actors[i]);
      }
    }
  }

  // Wire consumers, bound constants, control consumers and fetches (before any step runs).
  for (int v = 0; v < n; ++v) {
    if (!instantiate[size_t(v)])
      continue;
    auto& s = *setups[size_t(v)];
    s.num_inputs = int(g.at(v).inputs.size());
    s.num_control = int(g.at(v).control_inputs.size());
    s.bound.assign(size_t(s.num_inputs + s.num_control), tensor());
    s.expected = s.num_control;
    s.consumers.assign(size_t(s.num_outputs), {});
    s.fetch_slots.assign(size_t(s.num_outputs), {});
  }
  inst->feed_consumers.assign(feeds.size(), {});
  // Edges between devices go through a Send on the producer's device and one Recv per
  // (tensor, destination device) on the consumer's, paired by a rendezvous key. The Send runs
  // inline in the producer's actor; the Recv is a node actor of its own.
  std::map<std::pair<std::string, size_t>, std::shared_ptr<node_setup>> recvs;
  auto spawn_extra = [&](std::shared_ptr<node_setup> setup) {
    node_actor a = rt.system->spawn(node_behavior, setup);
    inst->actors->nodes.push_back(a);
    inst->num_nodes++;
    return a;
  };
  // The Recv on device `dst` for `tensor` (node u's output `index`, or its control output).
  auto recv_for = [&](int u, int index, size_t dst) -> node_setup& {
    size_t src = device_of_node[size_t(u)];
    const node& pn = g.at(u);
    std::string tensor_name = index < 0 ? pn.name + ":ctrl" : pn.name + ":" + std::to_string(index);
    auto it = recvs.find({tensor_name, dst});
    if (it != recvs.end())
      return *it->second;
    std::string key = rendezvous_key(rt.devices[src].name, 1, rt.devices[dst].name,
                                     "edge_" + std::to_string(u) + "_" + tensor_name);
    std::string base = pn.name + "_" + (index < 0 ? std::string("ctrl") : std::to_string(index)) +
                       "_to_" + std::to_string(dst);
    // The Send runs inline in the producer's actor when it emits (no extra hop).
    auto& producer = *setups[size_t(u)];
    producer.rendezvous = &rt.rendezvous;
    if (index < 0) {
      producer.control_send_keys.push_back(key);
    } else {
      if (producer.send_keys.empty())
        producer.send_keys.assign(size_t(producer.num_outputs), {});
      producer.send_keys[size_t(index)].push_back(key);
    }
    auto recv = std::make_shared<node_setup>();
    recv->name = "_recv/" + base;
    recv->op = "_Recv";
    recv->kern = std::make_unique<recv_kernel>(rt.rendezvous, key);
    recv->emit_on_completion = true;
    recv->cpu = rt.devices[dst].cpu.get();
    recv->device = rt.devices[dst].name;
    recv->num_outputs = 1;
    recv->consumers.assign(1, {});
    recv->fetch_slots.assign(1, {});
    inst->sources.push_back(spawn_extra(recv));
    recvs.emplace(std::make_pair(tensor_name, dst), recv);
    inst->uses_rendezvous = true;
    return *recv;
  };
  for (int v = 0; v < n; ++v) {
    if (!instantiate[size_t(v)])
      continue;
    auto& nd = g.at(v);
    auto refs = ref_input_slots(nd);
    auto& setup = *setups[size_t(v)];
    setup.ref_reads.assign(nd.inputs.size(), nullptr);
    for (size_t slot = 0; slot < nd.inputs.size(); ++slot) {
      auto e = nd.inputs[slot];
      consumer c{actors[size_t(v)], int32_t(slot),
                 dynamic && (nd.op == "Exit" || nd.op == "NextIteration") &&
                     nd.control_inputs.empty()};
      auto f = std::find(feeds.begin(), feeds.end(), e);
      if (f != feeds.end()) {
        inst->feed_consumers[size_t(f - feeds.begin())].push_back(c);
        setup.expected++;
        continue;
      }
      if (bindable[size_t(e.node)]) {
        setup.bound[slot] = std::get<tensor>(g.at(e.node).attrs.at("value"));
        continue;
      }
      e = through(e);
      auto& producer = *setups[size_t(e.node)];
      if (!refs[slot]) {
        if (auto var = producer.kern->variable_resource()) {
          setup.ref_reads[slot] = std::move(var);
          setup.has_ref_reads = true;
        }
      }
      size_t here = device_of_node[size_t(v)];
      // With control flow, edges between this process's devices are direct messages: they
      // carry the frame and iteration with them.
      if (device_of_node[size_t(e.node)] != here && !setup.ref_reads[slot] && !refs[slot] &&
          !dynamic)
        recv_for(e.node, e.index, here).consumers[0].push_back(c);
      else
        producer.consumers[size_t(e.index)].push_back(c);
      setup.expected++;
    }
    for (size_t k = 0; k < nd.control_inputs.size(); ++k) {
      int u = nd.control_inputs[k];
      consumer c{actors[size_t(v)], int32_t(nd.inputs.size() + k)};
      if (elided[size_t(u)]) { // the value goes to the control slot, which ignores it
        auto e = through({u, 0});
        setups[size_t(e.node)]->consumers[size_t(e.index)].push_back(c);
        continue;
      }
      if (device_of_node[size_t(u)] != device_of_node[size_t(v)] && !dynamic)
        recv_for(u, -1, device_of_node[size_t(v)]).consumers[0].push_back(c);
      else
        setups[size_t(u)]->control_consumers.push_back(c);
    }
    if (setup.expected == 0)
      inst->sources.push_back(actors[size_t(v)]);
    inst->num_nodes++;
  }
  for (size_t f = 0; f < fetches.size(); ++f) {
    auto it = std::find(feeds.begin(), feeds.end(), fetches[f]);
    inst->fed_fetches.push_back(it == feeds.end() ? -1 : int(it - feeds.begin()));
    if (it == feeds.end())
      setups[size_t(fetches[f].node)]->fetch_slots[size_t(fetches[f].index)].push_back(int(f));
  }
  if (dynamic) {
    auto plan = plan_frames(g, setups, feeds, elided);
    if (!plan) {
      for (auto& a : inst->actors->nodes)
        caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
      return plan.error();
    }
    for (auto f : fetches)
      (*plan)->fetch_names.push_back(g.endpoint_name(f));
    inst->flow = std::move(plan).value();
  }
  inst->in_flight = std::make_unique<std::counting_semaphore<4096>>(
      std::clamp(options.max_in_flight_steps, 1, 4096));
  return inst;
}

result<step_ptr> session::impl::start(const feed_list& feeds, const std::vector<output>& fetches,
                                      const std::vector<operation>& targets,
                                      std::function<void(step_state&)> extra_finish,
                                      std::shared_ptr<trace_buffer> trace, int64_t step_id) {
  std::vector<int64_t> key;
  key.reserve(feeds.size() + fetches.size() + targets.size() + 3);
  key.push_back(g.num_nodes());
  std::vector<endpoint> feed_eps, fetch_eps;
  std::vector<int> target_ids;
  for (auto& [o, t] : feeds) {
    if (&o.owner() != &g)
      return invalid_argument("feed '" + o.name() + "' belongs to another graph");
    auto& expected = o.shape();
    if (t.type() != o.type() || !t.shape().is_compatible_with(expected))
      return invalid_argument("feed '" + o.name() + "' expects a " + std::string(name(o.type())) +
                              " tensor of shape " + expected.to_string() + ", got " +
                              std::string(name(t.type())) + t.shape().to_string());
    feed_eps.push_back(o.ep());
    key.push_back(encode(o.ep()));
  }
  key.push_back(-1);
  for (auto& o : fetches) {
    if (&o.owner() != &g)
      return invalid_argument("fetch '" + o.name() + "' belongs to another graph");
    fetch_eps.push_back(o.ep());
    key.push_back(encode(o.ep()));
  }
  key.push_back(-2);
  for (auto& t : targets) {
    if (&t.owner() != &g)
      return invalid_argument("target '" + t.name() + "' belongs to another graph");
    target_ids.push_back(t.node_id());
    key.push_back(t.node_id());
  }
  for (size_t i = 0; i < feed_eps.size(); ++i)
    for (size_t j = i + 1; j < feed_eps.size(); ++j)
      if (feed_eps[i] == feed_eps[j])
        return invalid_argument("'" + feeds[i].first.name() + "' is fed twice");

  std::shared_ptr<instance> inst;
  {
    std::lock_guard lock(mu);
    if (closed)
      return cancelled("the session is closed");
    auto it = instances.find(key);
    if (it != instances.end()) {
      inst = it->second;
    } else {
      RUNNEL_ASSIGN_OR_RETURN(inst, build(feed_eps, fetch_eps, target_ids));
      instances.emplace(key, inst);
    }
    std::lock_guard active_lock(active_mu);
    ++active;
  }

  inst->in_flight->acquire();
  auto step = std::make_shared<step_state>();
  step->trace = std::move(trace);
  // Runtime-wide ids: Send/Recv of concurrent sessions share the rendezvous, keyed by step.
  step->id = step_id != 0 ? step_id : rt.next_step_id.fetch_add(1, std::memory_order_relaxed);
  step->remaining.store(inst->num_nodes, std::memory_order_relaxed);
  step->fetches.resize(fetches.size());
  step->actors = inst->actors;
  step->on_finish = [this, inst, extra = std::move(extra_finish)](step_state& s) {
    s.actors.reset();
    if (inst->uses_rendezvous)
      rt.rendezvous.end_step(s.id);
    if (extra)
      extra(s);
    inst->in_flight->release();
    std::lock_guard lock(active_mu);
    if (--active == 0)
      active_cv.notify_all();
  };
  for (size_t f = 0; f < fetches.size(); ++f)
    if (inst->fed_fetches[f] >= 0)
      step->fetches[f] = feeds[size_t(inst->fed_fetches[f])].second;
  if (inst->num_nodes == 0) {
    step->finish();
    return step;
  }
  if (inst->flow) {
    int64_t initial = int64_t(inst->sources.size());
    for (auto& cs : inst->feed_consumers)
      initial += int64_t(cs.size());
    step->flow = std::make_shared<flow_state>(inst->flow, *step, initial);
    auto root = step->flow->root_tag();
    for (size_t i = 0; i < feeds.size(); ++i)
      for (auto& c : inst->feed_consumers[i])
        caf::anon_send(c.actor, input_atom::value, step, c.slot, feeds[i].second, root);
    for (auto& a : inst->sources)
      caf::anon_send(a, start_atom::value, step);
    return step;
  }
  for (size_t i = 0; i < feeds.size(); ++i)
    for (auto& c : inst->feed_consumers[i])
      caf::anon_send(c.actor, input_atom::value, step, c.slot, feeds[i].second);
  for (auto& a : inst->sources)
    caf::anon_send(a, start_atom::value, step);
  return step;
}

void session::impl::stop_instances() {
  for (auto& [key, inst] : instances)
    for (auto& a : inst->actors->nodes)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  instances.clear();
}

void session::fill_memory(run_metadata& md, const std::vector<output>& fetches) const {
  const graph& g = impl_->g;
  auto& nodes = md.nodes;
  // Each traced node's buffers live from its start until its last traced consumer ends.
  std::unordered_map<std::string_view, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i)
    index.emplace(nodes[i].node, i);
  int64_t step_end = 0;
  for (auto& n : nodes)
    step_end = std::max(step_end, n.end_ns);
  std::vector<int64_t> free_at(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    free_at[i] = nodes[i].end_ns;
  for (auto& [name, i] : index) {
    auto v = g.find(name);
    if (!v)
      continue; // a Recv: it hands its Send's buffer on
    for (auto& e : g.at(*v).inputs) {
      auto it = index.find(g.at(e.node).name);
      if (it != index.end())
        free_at[it->second] = std::max(free_at[it->second], nodes[i].end_ns);
    }
  }
  for (auto& f : fetches) {
    auto it = index.find(g.at(f.node_id()).name);
    if (it != index.end())
      free_at[it->second] = step_end;
  }
  md.peak_bytes_per_device.clear();
  md.memory_timeline.clear();
  for (auto& d : impl_->rt.devices) {
    // (time, +bytes) at starts and (time, -bytes) at frees; at equal times allocations first.
    std::vector<std::pair<int64_t, int64_t>> events;
    for (size_t i = 0; i < nodes.size(); ++i)
      // A Recv's output is its Send's buffer, counted on the producer's device until its last
      // consumer anywhere ends.
      if (nodes[i].device == d.name && nodes[i].output_bytes > 0 && nodes[i].op != "_Recv") {
        events.emplace_back(nodes[i].start_ns, nodes[i].output_bytes);
        events.emplace_back(free_at[i], -nodes[i].output_bytes);
      }
    std::sort(events.begin(), events.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    int64_t live = 0, peak = 0;
    std::vector<std::pair<int64_t, int64_t>> series;
    for (auto& [t, delta] : events) {
      live += delta;
      peak = std::max(peak, live);
      if (!series.empty() && series.back().first == t)
        series.back().second = live;
      else
        series.emplace_back(t, live);
    }
    md.peak_bytes_per_device.emplace_back(d.name, peak);
    md.memory_timeline.push_back(std::move(series));
  }
}

session::session(runtime& rt, const graph& g, session_options options)
    : impl_(std::make_unique<impl>(rt.internals(), g, options)) {
  std::lock_guard lock(impl_->rt.sessions_mu);
  impl_->rt.sessions.push_back(this);
}

session::session(runtime& rt, const graph& g, const std::string& target,
                 session_options options)
    : session(rt, g, options) {
  remote_ = make_remote_session(g, target, options);
}

session::~session() {
  close();
}

result<std::vector<tensor>> session::run(const feed_list& feeds, const std::vector<output>& fetches,
                                         const std::vector<operation>& targets) {
  return run(feeds, fetches, targets, run_options{}, nullptr);
}

result<std::vector<tensor>> session::run(const feed_list& feeds, const std::vector<output>& fetches,
                                         const std::vector<operation>& targets,
                                         const run_options& options, run_metadata* metadata) {
  if (remote_) {
    auto f = run_remote(*remote_, feeds, fetches, targets);
    return f.get();
  }
  std::shared_ptr<trace_buffer> trace;
  if (options.trace)
    trace = std::make_shared<trace_buffer>();
  RUNNEL_ASSIGN_OR_RETURN(step_ptr step, impl_->start(feeds, fetches, targets, nullptr, trace,
                                                      options.step_id));
  if (options.timeout.count() > 0) {
    if (!step->wait_for(options.timeout))
      step->fail(deadline_exceeded("the step did not finish within " +
                                   std::to_string(options.timeout.count()) +
                                   " ms (run_options::timeout)"));
    step->wait();
  } else {
    step->wait();
  }
  if (trace && metadata) {
    {
      std::lock_guard lock(trace->mu);
      metadata->nodes = trace->nodes;
    }
    metadata->output_bytes_per_device.clear();
    for (auto& d : impl_->rt.devices) {
      int64_t bytes = 0;
      for (auto& n : metadata->nodes)
        if (n.device == d.name)
          bytes += n.output_bytes;
      metadata->output_bytes_per_device.emplace_back(d.name, bytes);
    }
    fill_memory(*metadata, fetches);
    if (impl_->options.costs) {
      std::lock_guard costs_lock(shared_costs_mu);
      learn_costs(*metadata, *impl_->options.costs);
    }
  }
  if (step->aborted.load(std::memory_order_acquire)) {
    std::lock_guard lock(step->error_mu);
    return step->error;
  }
  return std::move(step->fetches);
}

void learn_costs(const run_metadata& metadata, cost_model& costs) {
  for (auto& n : metadata.nodes) {
    auto spec = device_spec::parse(n.device);
    if (spec && spec->type)
      costs.record(n.node, *spec->type, double(n.end_ns - n.start_ns) / 1e9);
  }
}

std::string run_metadata::to_chrome_trace() const {
  // Devices become threads (tracks) of one process, in order of first appearance.
  std::vector<std::string> devices;
  auto track = [&](const std::string& d) {
    auto it = std::find(devices.begin(), devices.end(), d);
    if (it != devices.end())
      return int(it - devices.begin());
    devices.push_back(d);
    return int(devices.size() - 1);
  };
  auto quote = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\')
        out += '\\';
      if (static_cast<unsigned char>(c) < 0x20)
        continue;
      out += c;
    }
    return out + "\"";
  };
  std::string events;
  char buf[128];
  for (auto& n : nodes) {
    int tid = track(n.device);
    std::snprintf(buf, sizeof buf, ",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
                  tid, double(n.start_ns) / 1e3, double(n.end_ns - n.start_ns) / 1e3);
    events += (events.empty() ? "" : ",\n") + std::string("{\"name\":") + quote(n.node) +
              ",\"cat\":" + quote(n.op) + buf + ",\"args\":{\"op\":" + quote(n.op) +
              ",\"output_bytes\":" + std::to_string(n.output_bytes) +
              (n.frame.empty() ? std::string()
                               : ",\"frame\":" + quote(n.frame) +
                                     ",\"iteration\":" + std::to_string(n.iteration)) +
              "}}";
  }
  // Live output bytes per device as counter tracks.
  for (size_t d = 0; d < memory_timeline.size() && d < peak_bytes_per_device.size(); ++d)
    for (auto& [t, bytes] : memory_timeline[d]) {
      std::snprintf(buf, sizeof buf, ",\"ph\":\"C\",\"pid\":0,\"ts\":%.3f,\"args\":{\"bytes\":%lld}}",
                    double(t) / 1e3, static_cast<long long>(bytes));
      events += (events.empty() ? "" : ",\n") + std::string("{\"name\":") +
                quote("memory " + peak_bytes_per_device[d].first) + buf;
    }
  for (size_t i = 0; i < devices.size(); ++i)
    events += (events.empty() ? "" : ",\n") +
              std::string("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":") +
              std::to_string(i) + ",\"args\":{\"name\":" + quote(devices[i]) + "}}";
  return "{\"traceEvents\":[\n" + events + "\n],\"displayTimeUnit\":\"ns\"}\n";
}

result<std::vector<tensor>> session::run(const named_feed_list& feeds,
                                         const std::vector<std::string>& fetches,
                                         const std::vector<std::string>& targets) {
  // The graph is const here; outputs need a mutable pointer only to hand out handles.
  auto& g = const_cast<graph&>(impl_->g);
  feed_list f;
  for (auto& [name, t] : feeds) {
    auto e = g.find_endpoint(name);
    if (!e)
      return e.error().with_context("feed '" + name + "'");
    f.emplace_back(output(&g, *e), t);
  }
  std::vector<output> outs;
  for (auto& name : fetches) {
    auto e = g.find_endpoint(name);
    if (!e)
      return e.error().with_context("fetch '" + name + "'");
    outs.emplace_back(&g, *e);
  }
  std::vector<operation> ops;
  for (auto& name : targets) {
    auto id = g.find(name);
    if (!id)
      return not_found("target '" + name + "': no node named '" + name + "' in the graph");
    ops.emplace_back(&g, *id);
  }
  return run(f, outs, ops);
}

void session::run_callback(const feed_list& feeds, const std::vector<output>& fetches,
                           const std::vector<operation>& targets,
                           std::function<void(result<std::vector<tensor>>)> done) {
  run_callback(feeds, fetches, targets, run_options{}, std::move(done));
}

void session::run_callback(const feed_list& feeds, const std::vector<output>& fetches,
                           const std::vector<operation>& targets, const run_options& options,
                           std::function<void(result<std::vector<tensor>>)> done) {
  if (remote_) {
    run_remote_callback(*remote_, feeds, fetches, targets, std::move(done));
    return;
  }
  auto shared = std::make_shared<std::function<void(result<std::vector<tensor>>)>>(std::move(done));
  auto started = impl_->start(feeds, fetches, targets, [shared](step_state& s) {
    if (s.aborted.load(std::memory_order_acquire)) {
      status error;
      {
        std::lock_guard lock(s.error_mu);
        error = s.error;
      }
      (*shared)(std::move(error));
    } else {
      (*shared)(std::move(s.fetches));
    }
  }, nullptr, options.step_id);
  if (!started)
    (*shared)(started.error());
}

std::future<result<std::vector<tensor>>> session::run_async(const feed_list& feeds,
                                                            const std::vector<output>& fetches,
                                                            const std::vector<operation>& targets) {
  auto promise = std::make_shared<std::promise<result<std::vector<tensor>>>>();
  auto future = promise->get_future();
  run_callback(feeds, fetches, targets,
               [promise](result<std::vector<tensor>> r) { promise->set_value(std::move(r)); });
  return future;
}

void session::close() {
  if (remote_)
    close_remote(*remote_);
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->closed)
      return;
    impl_->closed = true;
  }
  {
    std::unique_lock lock(impl_->active_mu);
    impl_->active_cv.wait(lock, [&] { return impl_->active == 0; });
  }
  std::lock_guard lock(impl_->mu);
  impl_->stop_instances();
  std::lock_guard sessions_lock(impl_->rt.sessions_mu);
  auto& open = impl_->rt.sessions;
  open.erase(std::remove(open.begin(), open.end(), this), open.end());
}

runtime::impl& session::runtime_internals() const {
  return impl_->rt;
}

bool session::closed() const {
  std::lock_guard lock(impl_->mu);
  return impl_->closed;
}

size_t session::num_instances() const {
  std::lock_guard lock(impl_->mu);
  return impl_->instances.size();
}

} // namespace runnel
