// Firing nodes of instances with control flow: frame ops (Switch, Merge, Enter, Exit,
// NextIteration), deadness, inputs waiting per (step, frame, iteration), and the messages of
// the flow state, sent or fired inline in the producer's turn (docs/architecture.md).
#include <algorithm>

#include "runnel/actors/exec/firing.hpp"

namespace runnel {

std::shared_ptr<shared_flow_inputs> make_shared_flow_inputs() {
  return std::make_shared<shared_flow_inputs>();
}

namespace {

/// A node's pending iterations: its actor's own, or (a node producers fire inline) those under
/// its lock, held for as long as this lives.
class iterations_of {
public:
  iterations_of(std::vector<pending_iteration>* own, node_setup& s) {
    if (s.flow_inputs) {
      lock_ = std::unique_lock(s.flow_inputs->mu);
      its_ = &s.flow_inputs->iterations;
    } else {
      its_ = own;
    }
  }
  std::vector<pending_iteration>& operator*() { return *its_; }

private:
  std::unique_lock<flow_lock> lock_;
  std::vector<pending_iteration>* its_;
};

} // namespace

/// A node of an instance with control flow has all inputs of one (frame, iteration): dead, it
/// passes deadness on without running; Switch picks its live output; Enter, Exit and
/// NextIteration pass the value to where the flow state routes it; the rest run their kernels.
void fire_flow(node_actor::pointer self, node_setup& s, const step_ptr& step,
               std::vector<tensor> inputs, flow_tag tag) {
  if (step->aborted.load(std::memory_order_acquire))
    return;
  for (auto [slot, index] : s.frame_bound) { // the frame's invariants, bound once
    auto& [value, invariant_dead] = tag.frame->constants[size_t(index)];
    inputs[size_t(slot)] = value;
    tag.dead |= invariant_dead;
  }
  bool dead = tag.dead && s.flow.kind != flow_kind::trigger;
  tag.dead = false;
  if (dead && s.crosses_processes && s.num_outputs == 0) {
    // A Send of a dead value still sends (the Recv in the other process is waiting): an
    // invalid tensor, which the Send kernel turns into its dead marker.
    std::vector<tensor> inputs(s.bound.size());
    fire(self, s, step, std::move(inputs), tag);
    return;
  }
  if (dead) {
    std::vector<tensor> none(size_t(s.num_outputs));
    emit_flow(self, s, step, tag, none, nullptr, true);
    return;
  }
  switch (s.flow.kind) {
    case flow_kind::switch_op: {
      if (!read_variables(s, step, inputs))
        return;
      const tensor& pred = inputs[1];
      if (pred.type() != dtype::boolean || pred.num_elements() != 1) {
        step->fail(invalid_argument("the predicate must be a bool scalar, got " +
                                    std::string(name(pred.type())) + pred.shape().to_string())
                       .with_context(s.describe()));
        return;
      }
      bool taken = *pred.data<bool>();
      // The dead output stays empty (no consumer reads a dead value); the inputs go before the
      // step can end (emit_flow).
      std::vector<tensor> outs = spare_vectors<tensor>::take();
      outs.resize(2);
      outs[taken ? 1 : 0] = std::move(inputs[0]);
      spare_vectors<tensor>::keep(inputs);
      static const std::vector<char> false_dead{1, 0}, true_dead{0, 1};
      emit_flow(self, s, step, tag, outs, taken ? &false_dead : &true_dead, false);
      spare_vectors<tensor>::keep(outs);
      return;
    }
    case flow_kind::enter:
    case flow_kind::exit:
    case flow_kind::next_iteration: {
      if (!read_variables(s, step, inputs))
        return;
      std::vector<tensor> outs = spare_vectors<tensor>::take();
      outs.push_back(std::move(inputs[0]));
      spare_vectors<tensor>::keep(inputs);
      emit_flow(self, s, step, tag, outs, nullptr, false);
      spare_vectors<tensor>::keep(outs);
      return;
    }
    default:
      fire(self, s, step, std::move(inputs), tag);
  }
}

namespace {

/// Merge: the first live input of a (frame, iteration) goes out with its index; dead once all
/// the inputs expected there (iteration 0 of a loop: the Enters; later: the NextIterations) are.
/// `own` is null when a producer delivers inline (the node's inputs then wait under its lock).
void on_merge_input(node_actor::pointer self, std::vector<pending_iteration>* own, node_setup& s,
                    const step_ptr& step, int32_t slot, tensor value, flow_tag tag) {
  auto& fl = s.flow;
  int expected =
      fl.back_inputs == 0 ? s.num_inputs : (tag.iter == 0 ? fl.forward_inputs : fl.back_inputs);
  auto live = [&] {
    std::vector<tensor> outs = spare_vectors<tensor>::take();
    outs.push_back(std::move(value));
    outs.push_back(fl.merge_index[size_t(slot)]);
    emit_flow(self, s, step, {tag.frame, tag.iter, false}, outs, nullptr, false);
    spare_vectors<tensor>::keep(outs);
  };
  auto all_dead = [&] {
    std::vector<tensor> none(2);
    emit_flow(self, s, step, {tag.frame, tag.iter, false}, none, nullptr, true);
  };
  if (expected == 1) {
    tag.dead ? all_dead() : live();
    return;
  }
  bool complete, fired;
  {
    iterations_of held(own, s);
    if (step->aborted.load(std::memory_order_acquire))
      return; // the abort may have dropped this node's iterations already: add none after it
    auto& its = *held;
    auto it = std::find_if(its.begin(), its.end(), [&](const pending_iteration& p) {
      return p.step == step->id && p.frame == tag.frame && p.iter == tag.iter;
    });
    if (it == its.end()) {
      its.emplace_back(step->id, tag.frame, tag.iter, std::vector<tensor>());
      it = its.end() - 1;
    }
    complete = ++it->arrived == expected;
    fired = it->fired;
    if (!tag.dead && !fired)
      it->fired = true;
    if (complete)
      its.erase(it);
  }
  if (!tag.dead && !fired) {
    live();
  } else if (complete && !fired) {
    all_dead();
  } else {
    flow_messages out;
    bool done = step->flow->consumed(tag, *out);
    dispatch_flow(self, step, *out, done);
  }
}

} // namespace

void on_flow_input(node_actor::pointer self, std::vector<pending_iteration>* own, node_setup& s,
                   const step_ptr& step, int32_t slot, tensor value, flow_tag tag) {
  if (s.flow.kind == flow_kind::merge) {
    on_merge_input(self, own, s, step, slot, std::move(value), tag);
    return;
  }
  if (s.expected == 1) {
    std::vector<tensor> inputs = bound_inputs(s);
    inputs[size_t(slot)] = std::move(value);
    fire_flow(self, s, step, std::move(inputs), tag);
    return;
  }
  std::vector<tensor> inputs;
  bool ready = false;
  {
    iterations_of held(own, s);
    if (step->aborted.load(std::memory_order_acquire))
      return; // the abort may have dropped this node's iterations already: add none after it
    auto& its = *held;
    auto it = std::find_if(its.begin(), its.end(), [&](const pending_iteration& p) {
      return p.step == step->id && p.frame == tag.frame && p.iter == tag.iter;
    });
    if (it == its.end()) {
      its.emplace_back(step->id, tag.frame, tag.iter, bound_inputs(s));
      it = its.end() - 1;
    }
    it->inputs[size_t(slot)] = std::move(value);
    it->dead |= tag.dead;
    if (++it->arrived == s.expected) {
      inputs = std::move(it->inputs);
      tag.dead = it->dead;
      its.erase(it);
      ready = true;
    }
  }
  if (ready) {
    fire_flow(self, s, step, std::move(inputs), tag);
    return;
  }
  flow_messages out;
  bool done = step->flow->consumed(tag, *out);
  dispatch_flow(self, step, *out, done);
}

namespace {

/// A flow message a producer fires inline, waiting for the thread's current firing to end. Its
/// step is the draining dispatch's (a firing's messages stay in its step), which holds it: no
/// reference of its own, which cost an atomic add and subtract a firing.
struct inline_work {
  node_actor::pointer self;
  flow_message m;
};

/// The inline firings of this thread's current turn, run one after another by the outermost
/// dispatch: a loop's chain of firings (Less, Switch, Add, Less, ...) would otherwise nest a
/// group of stack frames per firing. At most `max_inline_per_turn` run in one turn; later ones
/// go by message, so other actors get the thread between stretches of a long loop.
struct inline_queue {
  std::vector<inline_work> work;
  size_t next = 0;
  bool draining = false;
};
thread_local inline_queue inline_firings;
constexpr size_t max_inline_per_turn = 256;

void fire_inline(node_actor::pointer self, const step_ptr& step, flow_message& m) {
  on_flow_input(self, nullptr, *m.to->flow_inline, step, m.to->slot, std::move(m.value), m.tag);
}

} // namespace

void dispatch_flow(node_actor::pointer self, const step_ptr& step, std::vector<flow_message>& out,
                   bool step_done) {
  auto& q = inline_firings;
  for (auto& m : out) {
    bool inline_ok = m.to->flow_inline && !step->aborted.load(std::memory_order_acquire);
    if (inline_ok && q.draining && q.work.size() < max_inline_per_turn) {
      q.work.push_back({self, std::move(m)});
    } else if (inline_ok && !q.draining) {
      // In this turn, as the consumer's actor would have on the message; what that fires in
      // turn queues behind it.
      q.draining = true;
      fire_inline(self, step, m);
      for (; q.next < q.work.size(); ++q.next) {
        inline_work w = std::move(q.work[q.next]);          // firing it may grow the queue
        if (!step->aborted.load(std::memory_order_acquire)) // as its actor would drop it
          fire_inline(w.self, step, w.m);
      }
      q.work.clear();
      q.next = 0;
      q.draining = false;
    } else if (self) {
      self->send(m.to->actor, input_atom::value, step, m.to->slot, std::move(m.value), m.tag);
    } else {
      caf::anon_send(m.to->actor, input_atom::value, step, m.to->slot, std::move(m.value), m.tag);
    }
  }
  if (step_done) {
    if (auto st = step->flow->check_fetches(); !st.ok())
      step->fail(std::move(st));
    else
      step->finish();
  }
}

} // namespace runnel
