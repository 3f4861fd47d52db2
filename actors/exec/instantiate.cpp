// Instantiating a pruned, placed graph: which constants bind into their consumers, which
// pass-through nodes of loops and branches are elided, spawning the node actors device by device,
// wiring consumers, control consumers, fetches and the Sends and Recvs between devices, the nodes
// a producer may run inline, and the frames of graphs with control flow.
#include <functional>
#include <map>

#include "runnel/actors/exec/session_impl.hpp"
#include "runnel/placement/cost_model.hpp"
#include "runnel/placement/partition.hpp"

namespace runnel {
namespace {

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

/// One instantiation, stage by stage (build() runs them in order). Vectors indexed by node id.
class instance_builder {
public:
  instance_builder(runtime::impl& rt, const session_options& options, const graph& g,
                   const std::vector<size_t>& device_of_node, const std::vector<endpoint>& feeds,
                   const std::vector<endpoint>& fetches, const std::vector<int>& targets,
                   const std::vector<char>& needed)
      : rt(rt), options(options), g(g), device_of_node(device_of_node), feeds(feeds),
        fetches(fetches), targets(targets), needed(needed), n(g.num_nodes()),
        value_needed(size_t(n)), bindable(size_t(n), 0), instantiate(size_t(n), 0),
        keep(size_t(n), 0), elided(size_t(n), 0), inline_candidate(size_t(n), 0),
        direct_candidate(size_t(n), 0), setups(size_t(n)), actors(size_t(n)) {}

  result<std::shared_ptr<instance>> build() {
    mark_values_needed();
    bind_constants();
    elide_pass_throughs();
    inst = std::make_shared<instance>();
    inst->actors = std::make_shared<instance_actors>();
    for (int v = 0; v < n; ++v)
      if (instantiate[size_t(v)])
        placed.push_back(v);
    for (int v : placed) {
      dynamic |= is_control_flow_op(g.at(v).op);
      if (g.at(v).op == "_Send" || g.at(v).op == "_Recv")
        inst->uses_rendezvous = true; // a partition of a cluster's graph
    }
    RUNNEL_RETURN_IF_ERROR(spawn_nodes());
    reset_setups();
    mark_inline_candidates();
    return wire_all();
  }

private:
  bool is_fed(endpoint e) const { return std::find(feeds.begin(), feeds.end(), e) != feeds.end(); }

  /// Which outputs are read by value (not only through ref inputs or not at all).
  void mark_values_needed() {
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
  }

  /// Constants are bound into their consumers at instantiation: no message per step. A Const
  /// still becomes a node when it is fetched, a target, or something waits on it.
  void bind_constants() {
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
    for (int v = 0; v < n; ++v)
      any_flow |= needed[size_t(v)] && is_control_flow_op(g.at(v).op);
    if (any_flow)
      bind_pivoted_constants();
    for (int v = 0; v < n; ++v)
      instantiate[size_t(v)] = needed[size_t(v)] && (!bindable[size_t(v)] || keep[size_t(v)]);
  }

  /// In a loop or branch a Const waits on the context's pivot, so that it runs once per
  /// iteration or branch taken. Bound into a consumer that reads the pivot itself, it changes
  /// nothing (the consumer is dead exactly when the pivot is) and saves a firing per iteration.
  void bind_pivoted_constants() {
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
               std::any_of(r.inputs.begin(), r.inputs.end(),
                           [&](endpoint e) { return e.node == pivot && !is_fed(e); });
      }
      bindable[size_t(v)] = all;
    }
  }

  /// With control flow, an Identity or LoopCond (a pass-through: loop bodies and branches are
  /// full of them) is no node of its own: its consumers, control consumers included, take its
  /// input from its producer directly, with the same frame, iteration and deadness. So is a
  /// NextIteration: its Merge takes the producer's value as the next iteration's (flagged on the
  /// consumer). And so is a loop's Merge of one Enter and one NextIteration whose value_index
  /// nobody reads: exactly one of its inputs arrives in each iteration, so its consumers take
  /// both (the Enter's in iteration 0, the next value's after). Three firings less per loop
  /// variable and iteration.
  void elide_pass_throughs() {
    if (!any_flow)
      return;
    auto same_device = [&](int a, int b) {
      return device_of_node[size_t(a)] == device_of_node[size_t(b)];
    };
    for (int v = 0; v < n; ++v) {
      const node& nd = g.at(v);
      if (nd.op == "Merge" && needed[size_t(v)] && !keep[size_t(v)] && nd.inputs.size() == 2 &&
          nd.control_inputs.empty() && !value_needed[size_t(v)][1]) {
        auto a = nd.inputs[0], b = nd.inputs[1];
        if (g.at(a.node).op == "NextIteration")
          std::swap(a, b);
        if (g.at(a.node).op == "Enter" && g.at(b.node).op == "NextIteration" && !is_fed(a) &&
            !is_fed(b) && same_device(a.node, v) && same_device(b.node, v)) {
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
          !same_device(e.node, v))
        continue;
      elided[size_t(v)] = 1;
      instantiate[size_t(v)] = 0;
    }
  }

  /// What an elided node's consumers read instead: (producer output, whether the value counts
  /// for the next iteration), one source per input of an elided Merge.
  void sources(endpoint e, bool next, std::vector<std::pair<endpoint, bool>>& out) const {
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
  }

  /// The whole graph is placed (once per graph size), so that every instance agrees on where
  /// stateful nodes live; node actors are spawned device by device.
  status spawn_nodes() {
    std::vector<std::vector<int>> by_device(rt.devices.size());
    for (int v : placed)
      by_device[device_of_node[size_t(v)]].push_back(v);
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
        inst->actors->setups.push_back(req->setups[i]);
      }
    }
    return {};
  }

  /// Every node's slots, empty, before wiring.
  void reset_setups() {
    for (int v : placed) {
      auto& s = *setups[size_t(v)];
      s.num_inputs = int(g.at(v).inputs.size());
      s.num_control = int(g.at(v).control_inputs.size());
      s.bound.assign(size_t(s.num_inputs + s.num_control), tensor());
      s.expected = s.num_control;
      s.consumers.assign(size_t(s.num_outputs), {});
      s.fetch_slots.assign(size_t(s.num_outputs), {});
    }
    inst->feed_consumers.assign(feeds.size(), {});
  }

  /// Cheap nodes a producer on their device runs inline, in its own turn (node_actor.cpp): a
  /// stateless synchronous CPU kernel which the cost model says is cheap (metadata ops, or a few
  /// thousand FLOPs). Without control flow: one with one input to wait for (the rest constants)
  /// and no control inputs. With control flow: also the frame ops (Switch, Merge, Enter, Exit,
  /// NextIteration) and nodes waiting for several inputs, whose inputs then wait under a lock
  /// (node_setup::flow_inputs); a kernel's output shapes must be known (in a loop an unknown
  /// batch could hide a large one).
  void mark_inline_candidates() {
    if (!options.inline_firing)
      return;
    cost_model estimates;
    for (int v : placed) {
      const node& nd = g.at(v);
      auto& setup = *setups[size_t(v)];
      const op_def* def = g.ops().find(nd.op);
      bool frame_op = nd.op == "Switch" || nd.op == "Merge" || nd.op == "Enter" ||
                      nd.op == "Exit" || nd.op == "NextIteration";
      if (setup.gpu || setup.kern->is_async() || setup.emit_on_completion || !def ||
          (def->stateful && !frame_op) || nd.op == "_Send" || nd.op == "_Recv" ||
          (!nd.control_inputs.empty() && !dynamic))
        continue;
      if (!frame_op && !is_metadata_op(nd.op) && estimates.flops(g, nd) > 32768) {
        // Too costly to run in a producer's turn: one that goes to its device's executor may
        // be posted there by its producer instead (consumer::direct_node).
        direct_candidate[size_t(v)] = !dynamic && setup.executor && waits_for_one(nd);
        // With several inputs to wait for, its inputs wait under a lock and the producer of
        // the last one posts it (consumer::gather_node).
        if (!dynamic && setup.executor && waits_for_several(nd))
          setup.gathered = make_gathered_inputs();
        continue;
      }
      if (dynamic) {
        bool known = frame_op || is_metadata_op(nd.op);
        if (!known) {
          known = true;
          for (auto& sh : nd.output_shapes)
            known &= sh.is_fully_defined();
        }
        bool plain = true;
        for (auto e : nd.inputs)
          plain &= g.at(e.node).op != "VariableV2";
        inline_candidate[size_t(v)] = known && plain;
        continue;
      }
      inline_candidate[size_t(v)] = waits_for_one(nd);
    }
  }

  /// Whether `nd` waits for two inputs or more, none of them a variable.
  bool waits_for_several(const node& nd) const {
    int waits = 0;
    for (auto e : nd.inputs) {
      if (bindable[size_t(e.node)])
        continue;
      if (g.at(e.node).op == "VariableV2")
        return false;
      ++waits;
    }
    return waits >= 2;
  }

  /// Whether `nd` waits for exactly one input, not fed and not a variable (the rest constants).
  bool waits_for_one(const node& nd) const {
    int waits = 0;
    bool plain = true;
    for (auto e : nd.inputs) {
      if (bindable[size_t(e.node)])
        continue;
      ++waits;
      plain &= !is_fed(e) && g.at(e.node).op != "VariableV2";
    }
    return waits == 1 && plain;
  }

  /// Edges between devices go through a Send on the producer's device and one Recv per
  /// (tensor, destination device) on the consumer's, paired by a rendezvous key. The Send runs
  /// inline in the producer's actor; the Recv is a node actor of its own. This is the Recv on
  /// device `dst` for node u's output `index` (its control output when negative).
  node_setup& recv_for(int u, int index, size_t dst) {
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
      auto cuda = [&](size_t d) {
        return rt.devices[d].gpu && rt.devices[d].gpu->kind() == "CUDA";
      };
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
    node_actor a = rt.system->spawn(node_behavior, recv);
    inst->actors->nodes.push_back(a);
    inst->num_nodes++;
    inst->local_recvs.push_back(recv);
    recvs.emplace(std::make_pair(tensor_name, dst), recv);
    inst->uses_rendezvous = true;
    return *recv;
  }

  /// Has every elided node's sources send to `c` (once per iteration, from one of them).
  void consume_through_elided(endpoint e, const consumer& c) {
    std::vector<std::pair<endpoint, bool>> from;
    sources(e, false, from);
    for (auto [p, next] : from) {
      consumer cp = c;
      cp.next_iteration = next;
      setups[size_t(p.node)]->consumers[size_t(p.index)].push_back(cp);
    }
  }

  /// A bound constant; a float one read by a GPU kernel goes to the device once, here, not every
  /// step (integer constants are shapes, axes and indices, read on the host; so is Fill's value).
  result<tensor> bound_value(const node& nd, const node_setup& setup, int producer) {
    tensor value = std::get<tensor>(g.at(producer).attrs.at("value"));
    if (!setup.gpu || !is_floating(value.type()) || nd.op == "Fill")
      return value;
    auto key = std::make_pair(producer, setup.gpu);
    auto it = uploaded.find(key);
    if (it == uploaded.end()) {
      auto dev = setup.gpu->upload(value, g.at(producer).name);
      if (!dev.ok())
        return dev.error().with_context("node '" + nd.name + "' (op " + nd.op + ")");
      it = uploaded.emplace(key, std::move(dev).value()).first;
    }
    return it->second;
  }

  /// Node v's input `slot`: a feed, a bound constant, an elided node's sources, a Recv, or its
  /// producer directly (inline when it may).
  status wire_input(int v, size_t slot, const std::vector<bool>& refs) {
    auto& nd = g.at(v);
    auto& setup = *setups[size_t(v)];
    auto e = nd.inputs[slot];
    consumer c{actors[size_t(v)], int32_t(slot),
               dynamic && (nd.op == "Exit" || nd.op == "NextIteration") &&
                   nd.control_inputs.empty()};
    auto f = std::find(feeds.begin(), feeds.end(), e);
    if (f != feeds.end()) {
      inst->feed_consumers[size_t(f - feeds.begin())].push_back(c);
      setup.expected++;
      return {};
    }
    if (bindable[size_t(e.node)]) {
      RUNNEL_ASSIGN_OR_RETURN(setup.bound[slot], bound_value(nd, setup, e.node));
      return {};
    }
    if (binds_invariant(v, slot, refs)) {
      setup.frame_bound.emplace_back(int32_t(slot), int32_t(e.node));
      setups[size_t(e.node)]->flow.binds = true;
      return {};
    }
    setup.expected++;
    // With control flow a candidate takes inline deliveries on any input from its device (an
    // elided node's sources are on it): they wait under the node's lock.
    if (dynamic && inline_candidate[size_t(v)] && device_of_node[size_t(e.node)] == here_of(v) &&
        !refs[slot] && (elided[size_t(e.node)] || !setups[size_t(e.node)]->emit_on_completion))
      c.flow_inline = inline_target(v);
    if (elided[size_t(e.node)]) {
      consume_through_elided(e, c);
      return {};
    }
    auto& producer = *setups[size_t(e.node)];
    if (!refs[slot]) {
      if (auto var = producer.kern->variable_resource()) {
        setup.ref_reads[slot] = std::move(var);
        setup.has_ref_reads = true;
      }
    }
    size_t here = device_of_node[size_t(v)];
    // Any producer will do, a Recv too: the post is the same from every thread.
    if (!dynamic && direct_candidate[size_t(v)] && !refs[slot] && !setup.ref_reads[slot]) {
      c.direct_node = setups[size_t(v)];
      setup.inlinable = true;
    }
    if (setup.gathered && !refs[slot] && !setup.ref_reads[slot]) {
      c.gather_node = setups[size_t(v)];
      setup.inlinable = true;
    }
    // With control flow, edges between this process's devices are direct messages: they
    // carry the frame and iteration with them.
    if (device_of_node[size_t(e.node)] != here && !setup.ref_reads[slot] && !refs[slot] &&
        !dynamic) {
      // This Recv's Send is in this process: its completion runs on the thread that produced
      // the value (or in the Recv's own turn), where a cheap consumer may run as it would behind
      // a producer on its own device. A Recv from another process completes on the network's
      // thread instead, which runs no kernel (below).
      if (inline_candidate[size_t(v)]) {
        c.inline_node = setups[size_t(v)];
        setup.inlinable = true;
      }
      recv_for(e.node, e.index, here).consumers[0].push_back(c);
      return {};
    }
    // Not behind a Recv: its completion runs on the sender's or the network's thread.
    if (!dynamic && inline_candidate[size_t(v)] && device_of_node[size_t(e.node)] == here &&
        !refs[slot] && !producer.emit_on_completion && g.at(e.node).op != "_Recv") {
      c.inline_node = setups[size_t(v)];
      setup.inlinable = true;
    }
    producer.consumers[size_t(e.index)].push_back(c);
    return {};
  }

  size_t here_of(int v) const { return device_of_node[size_t(v)]; }

  /// Whether input `slot` of node v comes straight from a loop invariant (a constant Enter) on
  /// its device, which v may take once per frame: v computes (no frame op but Switch, no
  /// Send/Recv) and has another input each iteration to fire it.
  bool is_invariant_input(int v, size_t slot, const std::vector<bool>& refs) const {
    auto e = g.at(v).inputs[slot];
    const node& p = g.at(e.node);
    return dynamic && !refs[slot] && p.op == "Enter" && get_attr<bool>(p.attrs, "is_constant") &&
           setups[size_t(e.node)] && !elided[size_t(e.node)] && here_of(e.node) == here_of(v) &&
           std::find(feeds.begin(), feeds.end(), e) == feeds.end();
  }
  bool binds_invariant(int v, size_t slot, const std::vector<bool>& refs) const {
    const node& nd = g.at(v);
    if (!is_invariant_input(v, slot, refs) || nd.op == "_Send" || nd.op == "_Recv" ||
        (is_control_flow_op(nd.op) && nd.op != "Switch"))
      return false;
    if (!nd.control_inputs.empty())
      return true;
    for (size_t k = 0; k < nd.inputs.size(); ++k)
      if (!bindable[size_t(nd.inputs[k].node)] && !is_invariant_input(v, k, refs))
        return true;
    return false;
  }

  /// Node v as the target of inline deliveries in an instance with control flow: its pending
  /// inputs move under a lock.
  node_setup* inline_target(int v) {
    auto& setup = setups[size_t(v)];
    setup->inlinable = true;
    if (!setup->flow_inputs)
      setup->flow_inputs = make_shared_flow_inputs();
    return setup.get();
  }

  status wire_node(int v) {
    auto& nd = g.at(v);
    auto refs = ref_input_slots(nd);
    auto& setup = *setups[size_t(v)];
    setup.ref_reads.assign(nd.inputs.size(), nullptr);
    setup.crosses_processes = nd.op == "_Send" || nd.op == "_Recv";
    for (size_t slot = 0; slot < nd.inputs.size(); ++slot)
      RUNNEL_RETURN_IF_ERROR(wire_input(v, slot, refs));
    for (size_t k = 0; k < nd.control_inputs.size(); ++k) {
      int u = nd.control_inputs[k];
      consumer c{actors[size_t(v)], int32_t(nd.inputs.size() + k)};
      if (dynamic && inline_candidate[size_t(v)] && here_of(u) == here_of(v) &&
          (elided[size_t(u)] || !setups[size_t(u)]->emit_on_completion))
        c.flow_inline = inline_target(v);
      if (elided[size_t(u)]) // the value goes to the control slot, which ignores it
        consume_through_elided({u, 0}, c);
      else if (device_of_node[size_t(u)] != device_of_node[size_t(v)] && !dynamic)
        recv_for(u, -1, device_of_node[size_t(v)]).consumers[0].push_back(c);
      else
        setups[size_t(u)]->control_consumers.push_back(c);
    }
    if (setup.expected == 0)
      inst->sources.push_back(actors[size_t(v)]);
    inst->num_nodes++;
    return {};
  }

  /// Wires consumers, bound constants, control consumers, fetches and (with control flow) frames,
  /// before any step runs; on an error every actor spawned stops.
  result<std::shared_ptr<instance>> wire_all() {
    status wired;
    for (int v = 0; v < n && wired.ok(); ++v)
      if (instantiate[size_t(v)])
        wired = wire_node(v);
    for (int v : placed)
      if (wired.ok() && setups[size_t(v)]->inlinable)
        for (auto& t : setups[size_t(v)]->bound)
          if (t.valid() && t.type() != dtype::string)
            setups[size_t(v)]->bound_bytes += t.bytes();
    for (size_t f = 0; f < fetches.size() && wired.ok(); ++f) {
      auto it = std::find(feeds.begin(), feeds.end(), fetches[f]);
      inst->fed_fetches.push_back(it == feeds.end() ? -1 : int(it - feeds.begin()));
      if (it == feeds.end())
        setups[size_t(fetches[f].node)]->fetch_slots[size_t(fetches[f].index)].push_back(int(f));
    }
    if (wired.ok() && dynamic) {
      auto plan = plan_frames(g, setups, feeds, elided);
      if (plan) {
        for (auto f : fetches)
          (*plan)->fetch_names.push_back(g.endpoint_name(f));
        inst->flow = std::move(plan).value();
      } else {
        wired = plan.error();
      }
    }
    if (!wired.ok()) {
      for (auto& a : inst->actors->nodes)
        caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
      return wired;
    }
    inst->in_flight = std::make_unique<std::counting_semaphore<4096>>(
        std::clamp(options.max_in_flight_steps, 1, 4096));
    return inst;
  }

  runtime::impl& rt;
  const session_options& options;
  const graph& g;
  const std::vector<size_t>& device_of_node;
  const std::vector<endpoint>& feeds;
  const std::vector<endpoint>& fetches;
  const std::vector<int>& targets;
  const std::vector<char>& needed;
  int n;
  std::vector<std::vector<bool>> value_needed;
  std::vector<char> bindable, instantiate, keep, elided, inline_candidate, direct_candidate;
  bool any_flow = false;   ///< a needed node is a control-flow op
  bool dynamic = false;    ///< an instantiated node is a control-flow op (frames are planned)
  std::vector<int> placed; ///< the nodes that become actors, by id
  std::vector<std::shared_ptr<node_setup>> setups;
  std::vector<node_actor> actors;
  std::shared_ptr<instance> inst;
  std::map<std::pair<std::string, size_t>, std::shared_ptr<node_setup>> recvs;
  std::map<std::pair<int, accelerator*>, tensor> uploaded; ///< constants bound on GPUs
};

} // namespace

result<std::shared_ptr<instance>>
session::impl::instantiate(const graph& g, const std::vector<size_t>& device_of_node,
                           const std::vector<endpoint>& feeds, const std::vector<endpoint>& fetches,
                           const std::vector<int>& targets, const std::vector<char>& needed) {
  return instance_builder(rt, options, g, device_of_node, feeds, fetches, targets, needed).build();
}

} // namespace runnel
