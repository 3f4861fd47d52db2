#pragma once
// Frames and iterations of steps with control flow (TensorFlow's v1 executor semantics on actors).
//
// A session instance whose nodes include Switch, Merge, Enter, Exit, NextIteration, LoopCond or
// ControlTrigger is *dynamic*: its messages carry a flow_tag (frame, iteration, dead), and each
// step has a flow_state that counts, per frame and iteration, the messages sent but not yet
// handled. A node actor reports every message it handles: either it fired nothing (consumed) or
// it emitted outputs (emit), which the flow_state routes — into a child frame (Enter), out to the
// parent (Exit), to the next iteration (NextIteration) — counting them before they are sent.
//
// An iteration is done when it has no messages or child frames outstanding, the iteration before
// it is done, and (iteration 0) every Enter of the frame has delivered. Done iterations are freed;
// at most `parallel_iterations` iterations of a frame exist at once, and messages for the next
// one wait (parked) until the oldest finishes. A frame is done when its last iteration is; Exits
// that never carried a live value then send a dead one to the parent. The step is done when the
// root frame is. Ownership: the step owns its flow_state, which owns the frames.

#include <atomic>
#include <deque>
#include <map>
#include <thread>

#include "runnel/actors/exec/internal.hpp"

namespace runnel {

/// A frame of the graph: the step itself (index 0) or a loop, identified by (parent, name).
struct static_frame {
  std::string name;
  int parent = -1;
  int enters = 0; ///< Enter nodes into this frame (each delivers once per parent iteration)
  /// Invariants (constant Enters) whose consumers take them once per frame: a frame's messages
  /// wait until these have arrived, and their firings read the values from the frame.
  int constants = 0;
  int parallel_iterations = 10;
  std::vector<std::shared_ptr<node_setup>> exits;
};

/// An instance's frames, found once when it is built.
struct flow_plan {
  std::vector<static_frame> frames;
  std::vector<std::string> fetch_names;
};

/// Assigns each node in `setups` (non-null entries) its frame, checking that a node's inputs all
/// come from one frame, and fills in the nodes' flow_node and the plan's frames. `fed` marks
/// fed endpoints' nodes (their values enter at the root frame); `elided` marks pass-through
/// nodes whose consumers read their input directly. Errors name the nodes and frames.
result<std::shared_ptr<flow_plan>> plan_frames(
    const graph& g, const std::vector<std::shared_ptr<node_setup>>& setups,
    const std::vector<endpoint>& feeds, const std::vector<char>& elided);

/// The lock of a flow state and of a node's pending iterations, held for a few pointer updates
/// by every firing inside a loop. Unlocking is a plain store where a
/// mutex's is an atomic exchange and a call: pthread's lock and unlock were 15% of
/// `while_loop_overhead`'s samples (perf). A waiter spins briefly, then yields.
class flow_lock {
public:
  void lock() noexcept {
    for (int spins = 0; held_.exchange(true, std::memory_order_acquire);)
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
#if defined(__x86_64__)
          __builtin_ia32_pause();
#endif
        } else {
          std::this_thread::yield();
        }
      }
  }
  void unlock() noexcept {
    held_.store(false, std::memory_order_release);
  }

private:
  std::atomic<bool> held_{false};
};

/// A message to send once the flow_state's lock is released.
struct flow_message {
  /// Where it goes: the actor, the input slot and, when its producer may fire it inline, the
  /// consumer's setup (consumer::flow_inline). Not owning: the instance's setups hold their
  /// consumer lists for as long as any step runs on it (as frame_state::invariants assume);
  /// a pointer where a copy of the actor's handle was two atomic operations a message.
  const consumer* to;
  tensor value;
  flow_tag tag;
};

/// One frame of one step.
struct frame_state {
  frame_state(const flow_plan& plan, int static_index, frame_state* parent, int64_t parent_iter);
  ~frame_state();
  const static_frame* info;
  int static_index;
  frame_state* parent;
  int64_t parent_iter;
  int pending_enters;
  int64_t base = 0;                 ///< the oldest iteration not done
  std::deque<int64_t> outstanding;  ///< per iteration from `base`: messages + child frames
  struct invariant {
    const std::vector<consumer>* consumers;
    tensor value;
    bool dead;
  };
  std::vector<invariant> invariants;
  /// The values (and deadness) of the frame's bound invariants, by flow_node::constant_index;
  /// written once, before any message into the frame goes out.
  std::vector<std::pair<tensor, bool>> constants;
  int pending_constants;
  std::vector<flow_message> held;   ///< messages into the frame while pending_constants > 0
  std::vector<flow_message> parked; ///< for the iteration after the window
  std::vector<char> exited_live;    ///< per exit of the frame
  /// The same in every process: the frame names from the top, each with its parent iteration
  /// ("outer", "outer:3/inner"); empty for the top level.
  std::string id;
  std::map<std::pair<int64_t, int>, std::unique_ptr<frame_state>> children;
};

class flow_state {
public:
  /// `initial`: the messages that start the step (feeds and sources), all in the root frame.
  flow_state(std::shared_ptr<const flow_plan> plan, step_state& step, int64_t initial);
  flow_tag root_tag() { return {&root_, 0, false}; }

  /// Routes node `s`'s outputs (and control outputs) after it handled a message tagged `in`:
  /// each output is dead when `node_dead` or its entry of `dead_outputs` is set. Returns true
  /// when that finished the step. Fetched outputs are recorded in the step.
  bool emit(const node_setup& s, flow_tag in, std::vector<tensor>& outputs,
            const std::vector<char>* dead_outputs, bool node_dead, std::vector<flow_message>& out);
  /// A message tagged `in` was handled without firing the node. True when the step finished.
  /// When that ends the oldest iteration of a frame whose window was full, the next iteration
  /// starts: its invariants and the messages parked for it go into `out`.
  bool consumed(flow_tag in, std::vector<flow_message>& out);

  /// The step's result: an error naming fetches that got no live value, else ok.
  status check_fetches() const;

private:
  void deliver(frame_state* f, int64_t iter, const std::vector<consumer>& to, const tensor& value,
               bool dead, std::vector<flow_message>& out, bool next_only = false);
  void start_iteration(frame_state* f, std::vector<flow_message>& out);
  frame_state* child(frame_state* f, int64_t iter, int static_index);
  bool done_message(frame_state* f, int64_t iter, std::vector<flow_message>& out);

  std::shared_ptr<const flow_plan> plan_;
  step_state& step_;
  flow_lock mu_;
  frame_state root_;
};

/// Sends what emit/consumed produced (firing cheap consumers inline, in this turn), and finishes
/// the step when they said so (flow_firing.cpp).
void dispatch_flow(node_actor::pointer self, const step_ptr& step,
                   std::vector<flow_message>& out, bool step_done);

/// Counts `delta` frames or per-iteration pending inputs made (+1) or gone (-1) in this process
/// (control_flow_state_in_use sums them: 0 when no step with control flow is running).
void count_flow_state(int64_t delta);

} // namespace runnel
