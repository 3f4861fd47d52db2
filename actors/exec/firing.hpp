#pragma once
// Firing nodes, shared by node_actor.cpp (the actor, kernels, outputs) and flow_firing.cpp
// (instances with control flow: frames, deadness, and nodes that producers fire inline). Private
// to actors/exec.
#include <mutex>
#include <vector>

#include "runnel/actors/exec/flow.hpp"

namespace runnel {

/// Runs node `s` on `inputs` (reading its variables, on its device's executor when large) and
/// emits its outputs.
void fire(node_actor::pointer self, node_setup& s, const step_ptr& step, std::vector<tensor> inputs,
          flow_tag tag = {});
/// Emits in an instance with control flow: the flow state routes and counts the outputs.
void emit_flow(node_actor::pointer self, node_setup& s, const step_ptr& step, flow_tag tag,
               std::vector<tensor>& outputs, const std::vector<char>* dead_outputs, bool node_dead);
/// Reads the variables behind ref inputs into `inputs`; false (the step failed) on an error.
bool read_variables(node_setup& s, const step_ptr& step, std::vector<tensor>& inputs);

/// Inputs of one (step, frame, iteration) of a node in an instance with control flow.
struct pending_iteration {
  int64_t step;
  frame_state* frame;
  int64_t iter;
  std::vector<tensor> inputs;
  int arrived = 0;
  bool dead = false;  ///< some input was dead
  bool fired = false; ///< Merge: a live input went out
  pending_iteration(int64_t s, frame_state* f, int64_t i, std::vector<tensor> in)
      : step(s), frame(f), iter(i), inputs(std::move(in)) {
    count_flow_state(1);
  }
  pending_iteration(pending_iteration&& o) noexcept
      : step(o.step), frame(o.frame), iter(o.iter), inputs(std::move(o.inputs)), arrived(o.arrived),
        dead(o.dead), fired(o.fired) {
    count_flow_state(1);
  }
  pending_iteration& operator=(pending_iteration&& o) noexcept {
    step = o.step;
    frame = o.frame;
    iter = o.iter;
    inputs = std::move(o.inputs);
    arrived = o.arrived;
    dead = o.dead;
    fired = o.fired;
    return *this;
  }
  ~pending_iteration() { count_flow_state(-1); }
};

struct shared_flow_inputs {
  flow_lock mu;
  std::vector<pending_iteration> iterations;
};

/// Emptied vectors that each thread keeps for its next firings in a loop: a firing's inputs, a
/// frame op's outputs and the flow messages were a heap allocation and a free each (jemalloc and
/// operator new: 9% of a loop's samples). At most 16 a thread and type, none over 64 elements.
template <class T> class spare_vectors {
public:
  /// An empty vector, with the capacity of one given back on this thread when there is one.
  static std::vector<T> take() {
    auto& l = list();
    if (l.empty())
      return {};
    std::vector<T> v = std::move(l.back());
    l.pop_back();
    return v;
  }
  /// Empties `v` and keeps it for this thread's next take().
  static void keep(std::vector<T>& v) {
    v.clear();
    auto& l = list();
    if (l.size() < 16 && v.capacity() > 0 && v.capacity() <= 64)
      l.push_back(std::move(v));
  }

private:
  static std::vector<std::vector<T>>& list() {
    thread_local std::vector<std::vector<T>> l;
    return l;
  }
};

/// `s`'s bound inputs (the missing ones empty) in a vector from the thread's spares.
inline std::vector<tensor> bound_inputs(const node_setup& s) {
  std::vector<tensor> inputs = spare_vectors<tensor>::take();
  inputs.assign(s.bound.begin(), s.bound.end());
  return inputs;
}

/// The flow messages of one firing, in a vector from the thread's spares (given back empty).
class flow_messages {
public:
  flow_messages() : v_(spare_vectors<flow_message>::take()) {}
  ~flow_messages() { spare_vectors<flow_message>::keep(v_); }
  flow_messages(const flow_messages&) = delete;
  flow_messages& operator=(const flow_messages&) = delete;
  std::vector<flow_message>& operator*() { return v_; }

private:
  std::vector<flow_message> v_;
};

/// A node of an instance with control flow has all inputs of one (frame, iteration): fires it.
void fire_flow(node_actor::pointer self, node_setup& s, const step_ptr& step,
               std::vector<tensor> inputs, flow_tag tag);
/// An input of a node in an instance with control flow, from its actor (`own`: the actor's
/// pending iterations) or delivered inline by a producer (null `own`).
void on_flow_input(node_actor::pointer self, std::vector<pending_iteration>* own, node_setup& s,
                   const step_ptr& step, int32_t slot, tensor value, flow_tag tag);

} // namespace runnel
