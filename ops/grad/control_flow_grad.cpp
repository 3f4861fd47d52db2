// Gradients through cond and while_loop (the backward pass's control-flow half; the walk is in
// ops/grad/gradients.cpp). The TensorArray ops' gradient functions are in tensor_array_grad.cpp.
//
// A cond's gradient mirrors it: the gradient of its Merge is switched into the branch that ran,
// the gradient of each value imported into a branch merges back out (zeros when the other branch
// ran). A while loop's gradient is a backward loop that undoes the forward iterations in reverse
// order, as in Yu et al. (EuroSys 2018), with one departure: the forward values it needs are kept
// in TensorArrays indexed by the forward iteration, not on stacks, so backward iterations may run
// in parallel (a stack would serialise them) and no pop can overtake a push.
#include "runnel/ops/grad/gradients_internal.hpp"
#include "runnel/ops/layers/tensor_array.hpp"

namespace runnel {

struct backprop::loop_state {
  while_context* forward = nullptr;
  while_context* backward = nullptr;
  output counter; ///< forward body: the iteration's number
  output index;   ///< backward body: the number of the forward iteration it undoes
  output own_counter; ///< the loop's own iteration counter, when it has one: read as `index`
  std::map<endpoint, output> reads;

  /// Saves `x` (a tensor of the forward loop, possibly in a cond branch inside it) in each
  /// forward iteration and returns its value in the backward iteration.
  output read(backprop& bp, output x);
};

namespace {

/// The chain of cond branches from just inside `loop` down to `c`, outermost first.
std::vector<const cond_context*> branches_between(const while_context* loop,
                                                  const flow_context* c) {
  std::vector<const cond_context*> chain;
  for (; c && c != loop; c = c->outer)
    chain.insert(chain.begin(), dynamic_cast<const cond_context*>(c));
  return chain;
}

/// Writes `x` at `index` when every branch of `chain` (from `i` on) was taken, threading `flow`
/// through: the flow comes out of each branch merged with the branch not taken.
output write_through(graph& g, const std::vector<const cond_context*>& chain, size_t i,
                     const tensor_array& ta, output index, output x, output flow) {
  if (i == chain.size())
    return ta.with_flow(flow).write(index, x).flow();
  auto* c = const_cast<cond_context*>(chain[i]);
  output taken;
  {
    auto inside = g.enter_context(c);
    taken = write_through(g, chain, i + 1, ta, index, x, identity(flow));
  }
  auto wiring = g.plumbing();
  auto other = g.build("Switch", "switch", {flow.ep(), c->pred().ep()});
  return g.build("Merge", "merge", {taken.ep(), other[size_t(1 - c->branch())].ep()},
                 {{"N", int64_t(2)}})[0];
}

/// The loop variable that counts iterations (starts at int32 0, adds 1 each iteration), or -1.
int counter_variable(const graph& g, const while_context& loop) {
  auto is_const = [&](endpoint e, int32_t v) {
    const node& n = g.at(e.node);
    if (n.op != "Const" || n.output_types[0] != dtype::i32)
      return false;
    tensor t = get_attr<tensor>(n.attrs, "value");
    return t.num_elements() == 1 && *t.data<int32_t>() == v;
  };
  for (size_t k = 0; k < loop.vars.size(); ++k) {
    auto& v = loop.vars[k];
    if (v.next < 0 || !is_const(g.at(v.enter).inputs[0], 0))
      continue;
    const node& step = g.at(g.at(v.next).inputs[0].node);
    if (step.op != "Add" || step.inputs.size() != 2)
      continue;
    endpoint body{v.body, 0};
    if ((step.inputs[0] == body && is_const(step.inputs[1], 1)) ||
        (step.inputs[1] == body && is_const(step.inputs[0], 1)))
      return int(k);
  }
  return -1;
}

} // namespace

output backprop::loop_state::read(backprop& bp, output x) {
  if (auto it = reads.find(x.ep()); it != reads.end())
    return it->second;
  if (own_counter.valid() && x.ep() == own_counter.ep())
    return index; // nothing to save: iteration t's counter is t
  graph& g = bp.g();
  const flow_context* where = g.context(x.node().context);
  auto chain = branches_between(forward, where);
  tensor_array ta = [&] {
    auto outside = g.enter_context(forward->outer);
    return tensor_array(g, x.type(), constant(g, int32_t(0)),
                        {.dynamic_size = true,
                         .clear_after_read = true,
                         .element_shape = x.shape(),
                         .name = "accumulator"});
  }();
  // One loop variable per saved value: its Exit, which the reads wait on, comes once every
  // write is done. (Chaining all writes on one variable saves nodes but measured no faster and
  // kept more memory alive.)
  auto var = add_loop_variable(
      g, *forward, ta.flow(),
      [&](output flow) { return write_through(g, chain, 0, ta, counter, x, flow); }, shape{});
  output saved(&g, {var.exit, 0});
  output handle, flow;
  {
    auto outside = g.enter_context(bp.grad_context(forward->outer));
    handle = bp.forward_value(ta.handle());
    flow = bp.forward_value(saved);
  }
  output value;
  {
    auto inside = g.enter_context(bp.grad_context(where));
    value = tensor_array(handle, flow, x.type(), x.shape()).read(index);
  }
  reads[x.ep()] = value;
  return value;
}

output backprop::forward_value(output x) {
  const node& nd = x.node();
  const while_context* loop = enclosing_loop(g_.context(nd.context));
  if (!loop)
    return x;
  if (nd.op == "Enter" && get_attr<bool>(nd.attrs, "is_constant"))
    return forward_value(output(&g_, nd.inputs[0])); // a loop invariant: the value outside
  if (nd.op == "Const") {
    auto key = std::pair{x.ep(), static_cast<const flow_context*>(g_.current_context())};
    auto it = copies_.find(key);
    if (it == copies_.end())
      it = copies_.emplace(key, constant(g_, get_attr<tensor>(nd.attrs, "value"))).first;
    return it->second;
  }
  for (auto& s : loops_)
    if (s->forward == loop)
      return s->read(*this, x);
  throw error(internal_error("gradients: '" + x.name() + "' in " + loop->describe() +
                             " is needed outside that loop's gradient"));
}

flow_context* backprop::grad_context(const flow_context* forward) {
  if (!forward)
    return nullptr;
  if (auto it = grad_contexts_.find(forward); it != grad_contexts_.end())
    return it->second;
  if (auto* w = dynamic_cast<const while_context*>(forward)) {
    for (auto& s : loops_)
      if (s->forward == w)
        return s->backward;
    throw error(internal_error("gradients: no backward loop for " + w->describe()));
  }
  auto* c = dynamic_cast<const cond_context*>(forward);
  if (!enclosing_loop(c)) // a branch at the top level: its gradient runs in the same branch
    return grad_contexts_[forward] = const_cast<flow_context*>(forward);
  // A branch inside a loop: a branch of the backward loop, on the forward predicate as saved.
  flow_context* outer = grad_context(c->outer);
  auto at = g_.enter_context(outer);
  output pred = forward_value(c->pred());
  auto& gc = g_.add_flow_context(std::make_unique<cond_context>(pred, c->branch(), c->name()));
  gc.outer = outer;
  auto sw = g_.build("Switch", "switch_pred", {pred.ep(), pred.ep()});
  auto pivot = identity(sw[size_t(c->branch())]);
  g_.mutable_node(pivot.node_id()).context = gc.id;
  gc.pivot = pivot.node_id();
  return grad_contexts_[forward] = &gc;
}

void backprop::cond_merge_grad(const node& merge, const std::vector<output>& grads) {
  output grad = grads[0];
  if (!grad.valid())
    return;
  for (auto in : merge.inputs) {
    auto* branch = dynamic_cast<const cond_context*>(g_.context(g_.at(in.node).context));
    if (!branch)
      throw error(unimplemented("gradients: Merge '" + merge.name +
                                "' was not built by cond; only cond's and while_loop's "
                                "control flow can be differentiated"));
    // Into the branch's gradient context: Switch(grad, pred)[branch], live when it ran.
    auto inside = g_.enter_context(grad_context(branch));
    pending[in].push_back(identity(grad));
  }
}

void backprop::cond_switch_grad(const node& sw, const cond_context& branch, output grad) {
  if (!grad.valid())
    return;
  auto at = g_.enter_context(grad_context(branch.outer));
  output pred = forward_value(output(&g_, sw.inputs[1]));
  output zero = zeros_like(forward_value(output(&g_, sw.inputs[0])));
  auto wiring = g_.plumbing();
  auto zero_sw = g_.build("Switch", "switch", {zero.ep(), pred.ep()});
  int other = 1 - branch.branch();
  pending[sw.inputs[0]].push_back(g_.build("Merge", "cond_grad",
                                           {grad.ep(), zero_sw[size_t(other)].ep()},
                                           {{"N", int64_t(2)}})[0]);
}

void backprop::differentiate_loop(while_context& loop) {
  graph& g = g_;
  std::vector<size_t> vars; // the loop variables gradients flow through
  for (size_t k = 0; k < loop.vars.size(); ++k)
    if (is_floating(g.at(loop.vars[k].merge).output_types[0]) && on_path(loop.vars[k].merge))
      vars.push_back(k);
  auto state = std::make_shared<loop_state>();
  state->forward = &loop;

  // Forward: count the iterations, with the loop's own counter when it has one (a variable
  // from 0 by 1, as most loops over time steps have), else with a counter added here.
  int own = counter_variable(g, loop);
  while_context::variable counter;
  if (own >= 0) {
    counter = loop.vars[size_t(own)];
    state->own_counter = output(&g, {counter.body, 0});
  } else {
    output zero_i;
    {
      auto outside = g.enter_context(loop.outer);
      zero_i = constant(g, int32_t(0), "forward_counter");
    }
    counter = add_loop_variable(
        g, loop, zero_i, [&](output i) { return i + constant(g, int32_t(1)); }, shape{});
  }
  state->counter = output(&g, {counter.body, 0});

  flow_context* outer = grad_context(loop.outer);
  auto at = g.enter_context(outer);
  output count = forward_value(output(&g, {counter.exit, 0}));
  std::vector<output> initial;
  for (size_t k : vars) {
    endpoint exit{loop.vars[k].exit, 0};
    output t = total(exit);
    if (t.valid())
      finished[exit] = t;
    else
      t = zeros_like(forward_value(output(&g, exit)));
    initial.push_back(t);
  }

  // Backward: as many iterations, counting down.
  std::string name = g.reserve_name(loop.name().substr(loop.name().rfind('/') + 1) + "_grad");
  auto& back = static_cast<while_context&>(g.add_flow_context(
      std::make_unique<while_context>(name, name + "/while_context", loop.parallel_iterations())));
  back.outer = outer;
  begin_loop_variable(g, back, sub(count, constant(g, int32_t(1))), shape{});
  for (size_t i = 0; i < vars.size(); ++i)
    begin_loop_variable(g, back, initial[i], g.at(loop.vars[vars[i]].enter).output_shapes[0]);
  {
    auto inside = g.enter_context(&back);
    back.pivot = back.vars[0].merge;
    auto more = greater_equal(output(&g, {back.vars[0].merge, 0}), constant(g, int32_t(0)));
    back.loop_cond = g.build("LoopCond", "loop_cond", {more.ep()})[0].node_id();
  }
  switch_loop_variables(g, back, 0);
  back.pivot = back.vars[0].body;
  state->backward = &back;
  state->index = output(&g, {back.vars[0].body, 0});
  loops_.push_back(state);

  // The gradient of each variable's next value is the backward variable; walking the body gives
  // the gradient of its value at the start of the iteration (at its Switch's true output).
  for (size_t i = 0; i < vars.size(); ++i)
    pending[g.at(loop.vars[vars[i]].next).inputs[0]].push_back(
        output(&g, {back.vars[i + 1].body, 0}));
  walk(&loop);

  std::vector<output> next;
  std::vector<std::pair<endpoint, output>> invariant_grads;
  output index_next;
  {
    auto inside = g.enter_context(&back);
    for (size_t i = 0; i < vars.size(); ++i) {
      output t = total({loop.vars[vars[i]].switch_op, 1});
      next.push_back(t.valid() ? t : zeros_like(output(&g, {back.vars[i + 1].body, 0})));
    }
    index_next = sub(state->index, constant(g, int32_t(1)));
    for (auto& [outside, enter] : loop.invariants()) {
      if (!is_floating(g.at(outside.node).output_types[size_t(outside.index)]))
        continue;
      output t = total(enter);
      if (t.valid())
        invariant_grads.emplace_back(outside, t);
    }
  }
  // A loop invariant's gradient is the sum over the iterations.
  for (auto& [outside, t] : invariant_grads) {
    output zero;
    {
      auto in_outer = g.enter_context(outer);
      zero = zeros_like(forward_value(output(&g, outside)));
    }
    auto sum = add_loop_variable(
        g, back, zero, [&, t = t](output acc) { return acc + t; }, zero.shape());
    pending[outside].push_back(output(&g, {sum.exit, 0}));
  }
  close_loop_variable(g, back, 0, index_next);
  for (size_t i = 0; i < vars.size(); ++i) {
    close_loop_variable(g, back, i + 1, next[i]);
    pending[g.at(loop.vars[vars[i]].enter).inputs[0]].push_back(
        output(&g, {back.vars[i + 1].exit, 0}));
  }
  loops_.pop_back();
}

// LoopCond passes a loop's predicate: no gradient (the backward loop has its own).
RUNNEL_GRADIENT_FAMILY(control_flow) {
  reg.add_non_differentiable("LoopCond");
}

} // namespace runnel
