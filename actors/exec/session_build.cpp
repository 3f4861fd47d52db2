// Building an executor instance for a signature (feeds, fetches, targets): pruning, binding
// constants, placement, spawning node actors, wiring consumers, Sends and Recvs across devices,
// and the frames of graphs with control flow.
#include <cstdio>
#include <map>

#include "runnel/actors/exec/session_impl.hpp"
#include "runnel/ops/optimize/graph_optimizer.hpp"
#include "runnel/placement/cost_model.hpp"
#include "runnel/placement/partition.hpp"
#include "runnel/placement/placer.hpp"
#include "runnel/placement/prune.hpp"

namespace runnel {
namespace {

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

status session::impl::place_graph() {
  int n = g.num_nodes();
  if (size_t(n) == device_of_node.size())
    return {};
  auto all = all_nodes(g);
  // GPUs take the ops that have GPU kernels, except in graphs with loops and conditionals: their
  // edges between devices are direct messages, with no transfer, so they stay on CPUs
  // (docs/gpu.md).
  bool control_flow = false;
  for (int v = 0; v < n && !control_flow; ++v)
    control_flow = is_control_flow_op(g.at(v).op);
  auto& kernels = runtime_kernels();
  auto has_kernel = [&](const node& nd, const std::string& type) {
    if (type == "GPU")
      return !control_flow && kernels.has_kernel(nd, device_type::gpu);
    return kernels.has_kernel(nd, device_type::cpu);
  };
  auto devices = placement_devices(rt);
  placement_options popts{
      .allow_soft_placement = options.allow_soft_placement,
      .no_gpu_reason = control_flow && rt.no_gpu_reason.empty()
                           ? "graphs with loops and conditionals run on CPUs only (docs/gpu.md)"
                           : rt.no_gpu_reason,
      .prefer_gpu = !control_flow};
  std::vector<size_t> where;
  if (options.placement == session_options::placement_policy::cost_model) {
    std::vector<device_params> params(devices.size(), resolve_cpu_params(rt));
    link_params links;
    for (size_t d = 0; d < devices.size(); ++d) {
      auto& dev = rt.devices[d];
      if (!dev.gpu)
        continue;
      auto& speed = resolve_gpu_throughput(dev); // measured on first use
      if (speed.flops_per_s > 0) {
        params[d].flops_per_s = speed.flops_per_s;
        params[d].bytes_per_s = speed.bytes_per_s;
        links.host_device_bytes_per_s =
            std::min(links.host_device_bytes_per_s, speed.host_link_bytes_per_s);
      }
      params[d].memory_bytes = int64_t(dev.gpu->memory_stats().bytes_limit);
    }
    std::lock_guard costs_lock(shared_costs_mu);
    cost_model estimates_only;
    const cost_model& costs = options.costs ? *options.costs : estimates_only;
    RUNNEL_ASSIGN_OR_RETURN(auto p,
                            place_greedy(g, all, devices, params, costs, has_kernel, popts, links));
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
  // A graph that asks for a GPU where there is none (soft placement moved it to a CPU) is where
  // the reason matters: said once per process, with the first such node.
  if (!rt.no_gpu_reason.empty() && options.allow_soft_placement) {
    static std::once_flag said;
    for (int v = 0; v < n; ++v) {
      auto spec = device_spec::parse(g.at(v).device);
      if (spec.ok() && spec->type == "GPU") {
        std::call_once(said, [&] {
          std::fprintf(stderr, "runnel: node '%s' asks for %s, but %s: it runs on a CPU (soft "
                       "placement)\n", g.at(v).name.c_str(), g.at(v).device.c_str(),
                       rt.no_gpu_reason.c_str());
        });
        break;
      }
    }
  }
  return {};
}

result<std::shared_ptr<instance>> session::impl::build(const std::vector<endpoint>& feeds,
                                                       const std::vector<endpoint>& fetches,
                                                       const std::vector<int>& targets) {
  int n = g.num_nodes();
  auto is_fed = [&](endpoint e) { return std::find(feeds.begin(), feeds.end(), e) != feeds.end(); };
  // Prune: walk back from fetches and targets, stopping at fed tensors.
  std::vector<int> roots(targets.begin(), targets.end());
  for (auto e : fetches)
    if (!is_fed(e))
      roots.push_back(e.node);
  std::vector<char> needed = prune(g, roots, feeds);
  // A needed placeholder must be fed.
  for (int v = 0; v < n; ++v)
    if (needed[size_t(v)] && g.at(v).op == "Placeholder") {
      auto& p = g.at(v);
      return invalid_argument("you must feed a value for placeholder '" + p.name + "' with dtype " +
                              std::string(name(p.output_types[0])) + " and shape " +
                              p.output_shapes[0].to_string());
    }

  RUNNEL_RETURN_IF_ERROR(place_graph());
  if (optimizer.any() && !has_control_flow(g, needed)) {
    graph_optimizer_context context{.kernels = &runtime_kernels(),
                                    .cpu = rt.devices.front().cpu.get()};
    context.device_of_node.reserve(device_of_node.size());
    for (size_t d : device_of_node)
      context.device_of_node.push_back(rt.devices[d].name);
    RUNNEL_ASSIGN_OR_RETURN(
        auto og, optimize_graph(g, needed, {feeds, fetches, targets}, optimizer, context));
    std::vector<size_t> where;
    for (int o : og.origin)
      where.push_back(device_of_node[size_t(o)]);
    auto& sig = og.signature;
    // Pruned again: a fed tensor's stand-in Placeholder is no node of the instance.
    std::vector<int> og_roots(sig.targets.begin(), sig.targets.end());
    for (auto e : sig.fetches)
      if (std::find(sig.feeds.begin(), sig.feeds.end(), e) == sig.feeds.end())
        og_roots.push_back(e.node);
    RUNNEL_ASSIGN_OR_RETURN(auto inst,
                            instantiate(*og.g, where, sig.feeds, sig.fetches, sig.targets,
                                        prune(*og.g, og_roots, sig.feeds)));
    inst->optimized = std::move(og.g);
    return inst;
  }
  return instantiate(g, device_of_node, feeds, fetches, targets, needed);
}

result<std::shared_ptr<instance>>
session::impl::instantiate(const graph& g, const std::vector<size_t>& device_of_node,
                           const std::vector<endpoint>& feeds, const std::vector<endpoint>& fetches,
                           const std::vector<int>& targets, const std::vector<char>& needed) {
  int n = g.num_nodes();
  auto is_fed = [&](endpoint e) { return std::find(feeds.begin(), feeds.end(), e) != feeds.end(); };
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

  // The whole graph is placed (once per graph size), so that every instance agrees on where
  // stateful nodes live; node actors are spawned device by device.
  // With control flow, an Identity or LoopCond (a pass-through: loop bodies and branches are
  // full of them) is no node of its own: its consumers, control consumers included, take its
  // input from its producer directly, with the same frame, iteration and deadness. So is a
  // NextIteration: its Merge takes the producer's value as the next iteration's (flagged on the
  // consumer). And so is a loop's Merge of one Enter and one NextIteration whose value_index
  // nobody reads: exactly one of its inputs arrives in each iteration, so its consumers take
  // both (the Enter's in iteration 0, the next value's after). Three firings less per loop
  // variable and iteration.
  std::vector<char> elided(static_cast<size_t>(n), 0);
  if (any_flow)
    for (int v = 0; v < n; ++v) {
      const node& nd = g.at(v);
      if (nd.op == "Merge" && needed[size_t(v)] && !keep[size_t(v)] && nd.inputs.size() == 2 &&
          nd.control_inputs.empty() && !value_needed[size_t(v)][1]) {
        auto a = nd.inputs[0], b = nd.inputs[1];
        if (g.at(a.node).op == "NextIteration")
          std::swap(a, b);
        if (g.at(a.node).op == "Enter" && g.at(b.node).op == "NextIteration" && !is_fed(a) &&
            !is_fed(b) && device_of_node[size_t(a.node)] == device_of_node[size_t(v)] &&
            device_of_node[size_t(b.node)] == device_of_node[size_t(v)]) {
          elided[size_t(v)] = 1;
          instantiate[size_t(v)] = 0;
        }
        continue;
      }
      if (!needed[size_t(v)] || keep[size_t(v)] ||
          (nd.op != "Identity" && nd.op != "LoopCond" && nd.op != "NextIteration") ||
          nd.inputs.size() != 1 || !nd.control_inputs.empty())
        continue;
      auto e = nd.inputs[0];
      if (is_fed(e) || bindable[size_t(e.node)] || g.at(e.node).op == "VariableV2" ||
          device_of_node[size_t(e.node)] != device_of_node[size_t(v)])
        continue;
      elided[size_t(v)] = 1;
      instantiate[size_t(v)] = 0;
    }
  // What an elided node's consumers read instead: (producer output, whether the value counts
  // for the next iteration), one source per input of an elided Merge.
  std::function<void(endpoint, bool, std::vector<std::pair<endpoint, bool>>&)> sources =
      [&](endpoint e, bool next, std::vector<std::pair<endpoint, bool>>& out) {
        if (!elided[size_t(e.node)]) {
          out.emplace_back(e, next);
          return;
        }
        const node& nd = g.at(e.node);
        if (nd.op == "Merge") {
          for (auto in : nd.inputs)
            sources(in, next, out);
          return;
        }
        sources(nd.inputs[0], next || nd.op == "NextIteration", out);
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
      inst->uses_rendezvous = true; // a partition of a cluster's graph
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
      if (producer.send_keys.empty()) {
        producer.send_keys.assign(size_t(producer.num_outputs), {});
        producer.send_to_gpu.assign(size_t(producer.num_outputs), {});
      }
      producer.send_keys[size_t(index)].push_back(key);
      // Device to device only between real GPUs (a simulated GPU's memory is host memory, and
      // it could not read a real GPU's).
      auto cuda = [&](size_t d) { return rt.devices[d].gpu && rt.devices[d].gpu->kind() == "CUDA"; };
      producer.send_to_gpu[size_t(index)].push_back(cuda(src) && cuda(dst));
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
  // Cheap nodes a producer on their device runs inline, in its own turn (node_actor.cpp): a
  // stateless synchronous CPU kernel with one input to wait for (the rest constants) and no
  // control inputs, which the cost model says is cheap (metadata ops, or a few thousand FLOPs)
  // in graphs without control flow.
  std::vector<char> inline_candidate(static_cast<size_t>(n), 0);
  if (!dynamic && options.inline_firing) {
    cost_model estimates;
    for (int v = 0; v < n; ++v) {
      if (!instantiate[size_t(v)])
        continue;
      const node& nd = g.at(v);
      auto& setup = *setups[size_t(v)];
      const op_def* def = g.ops().find(nd.op);
      if (setup.gpu || setup.kern->is_async() || setup.emit_on_completion || !def ||
          def->stateful || nd.op == "_Send" || nd.op == "_Recv" || !nd.control_inputs.empty() ||
          (!is_metadata_op(nd.op) && estimates.flops(g, nd) > 32768))
        continue;
      int waits = 0;
      bool plain = true;
      for (auto e : nd.inputs) {
        if (bindable[size_t(e.node)])
          continue;
        ++waits;
        plain &= !is_fed(e) && g.at(e.node).op != "VariableV2";
      }
      inline_candidate[size_t(v)] = waits == 1 && plain;
    }
  }
  std::map<std::pair<int, accelerator*>, tensor> uploaded; // constants bound on GPUs
  for (int v = 0; v < n; ++v) {
    if (!instantiate[size_t(v)])
      continue;
    auto& nd = g.at(v);
    auto refs = ref_input_slots(nd);
    auto& setup = *setups[size_t(v)];
    setup.ref_reads.assign(nd.inputs.size(), nullptr);
    setup.crosses_processes = nd.op == "_Send" || nd.op == "_Recv";
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
        tensor value = std::get<tensor>(g.at(e.node).attrs.at("value"));
        // A float constant read by a GPU kernel goes to the device once, here, not every step
        // (integer constants are shapes, axes and indices, read on the host; so is Fill's value).
        if (setup.gpu && is_floating(value.type()) && nd.op != "Fill") {
          auto key = std::make_pair(e.node, setup.gpu);
          auto it = uploaded.find(key);
          if (it == uploaded.end()) {
            auto dev = setup.gpu->upload(value, g.at(e.node).name);
            if (!dev.ok())
              return dev.error().with_context("node '" + nd.name + "' (op " + nd.op + ")");
            it = uploaded.emplace(key, std::move(dev).value()).first;
          }
          value = it->second;
        }
        setup.bound[slot] = std::move(value);
        continue;
      }
      if (elided[size_t(e.node)]) { // one message per iteration from one of its sources
        std::vector<std::pair<endpoint, bool>> from;
        sources(e, false, from);
        for (auto [p, next] : from) {
          consumer cp = c;
          cp.next_iteration = next;
          setups[size_t(p.node)]->consumers[size_t(p.index)].push_back(cp);
        }
        setup.expected++;
        continue;
      }
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
      else {
        // Not behind a Recv: its completion runs on the sender's or the network's thread.
        if (inline_candidate[size_t(v)] && device_of_node[size_t(e.node)] == here &&
            !refs[slot] && !producer.emit_on_completion && g.at(e.node).op != "_Recv") {
          c.inline_node = setups[size_t(v)];
          setup.inlinable = true;
        }
        producer.consumers[size_t(e.index)].push_back(c);
      }
      setup.expected++;
    }
    for (size_t k = 0; k < nd.control_inputs.size(); ++k) {
      int u = nd.control_inputs[k];
      consumer c{actors[size_t(v)], int32_t(nd.inputs.size() + k)};
      if (elided[size_t(u)]) { // the value goes to the control slot, which ignores it
        std::vector<std::pair<endpoint, bool>> from;
        sources({u, 0}, false, from);
        for (auto [p, next] : from) {
          consumer cp = c;
          cp.next_iteration = next;
          setups[size_t(p.node)]->consumers[size_t(p.index)].push_back(cp);
        }
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
  for (int v = 0; v < n; ++v)
    if (instantiate[size_t(v)] && setups[size_t(v)]->inlinable)
      for (auto& t : setups[size_t(v)]->bound)
        if (t.valid() && t.type() != dtype::string)
          setups[size_t(v)]->bound_bytes += t.bytes();
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

} // namespace runnel
