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

/// The flow messages of one firing, in a vector from a per-thread pool (given back empty): each
/// firing's messages were a heap allocation and a free of their own.
class flow_messages {
public:
  flow_messages();
  ~flow_messages();
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
