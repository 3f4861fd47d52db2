// Frames and iterations of steps with control flow: the static plan of an instance's frames and
// the per-step counting that decides when iterations, frames and the step are done.
#include "runnel/actors/exec/flow.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace runnel {

namespace {

/// One thread's count of flow state made, less that gone. Only that thread writes it, with a plain
/// load and store: a pending iteration comes and goes with every firing in a loop, and one counter
/// for the process, changed with atomic adds from every thread, bounced its cache line between
/// the cores each time.
struct alignas(64) flow_count_slot {
  std::atomic<int64_t> n{0};
};

/// Every slot ever made (a thread's goes to the next thread when it exits, count and all: the
/// sum stays right), and those free.
struct flow_count_slots {
  std::mutex mu;
  std::vector<flow_count_slot*> all, free;
  std::atomic<int64_t> after_exit{0}; ///< counts of threads past their slot's release
};

flow_count_slots& slots() {
  static auto* s = new flow_count_slots; // never destroyed: threads may count after main's statics
  return *s;
}

thread_local flow_count_slot* my_slot = nullptr;
thread_local bool my_slot_gone = false;

/// Gives the thread's slot back when it exits.
struct slot_release {
  ~slot_release() {
    auto& s = slots();
    std::lock_guard lock(s.mu);
    s.free.push_back(my_slot);
    my_slot = nullptr;
    my_slot_gone = true;
  }
};

flow_count_slot* claim_slot() {
  auto& s = slots();
  {
    std::lock_guard lock(s.mu);
    if (!s.free.empty()) {
      my_slot = s.free.back();
      s.free.pop_back();
    } else {
      my_slot = s.all.emplace_back(new flow_count_slot);
    }
  }
  thread_local slot_release release;
  (void)release;
  return my_slot;
}

} // namespace

void count_flow_state(int64_t delta) {
  flow_count_slot* slot = my_slot;
  if (!slot) {
    if (my_slot_gone) { // counted while the thread's other thread-locals are destroyed
      slots().after_exit.fetch_add(delta, std::memory_order_relaxed);
      return;
    }
    slot = claim_slot();
  }
  slot->n.store(slot->n.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

int64_t control_flow_state_in_use() {
  auto& s = slots();
  std::lock_guard lock(s.mu);
  int64_t sum = s.after_exit.load(std::memory_order_relaxed);
  for (auto* slot : s.all)
    sum += slot->n.load(std::memory_order_relaxed);
  return sum;
}

// ---- the plan ----

namespace {

std::string frame_label(const std::vector<static_frame>& frames, int f) {
  return f == 0 ? "the step's top level" : "frame '" + frames[size_t(f)].name + "'";
}

flow_kind kind_of(const std::string& op) {
  if (op == "Switch")
    return flow_kind::switch_op;
  if (op == "Merge")
    return flow_kind::merge;
  if (op == "Enter")
    return flow_kind::enter;
  if (op == "Exit")
    return flow_kind::exit;
  if (op == "NextIteration")
    return flow_kind::next_iteration;
  if (op == "ControlTrigger")
    return flow_kind::trigger;
  return flow_kind::plain;
}

} // namespace

namespace {

/// plan_frames, stage by stage: each node's frame, then each node's part in its frame.
class frame_planner {
public:
  frame_planner(const graph& g, const std::vector<std::shared_ptr<node_setup>>& setups,
                const std::vector<endpoint>& feeds, const std::vector<char>& elided)
      : g(g), setups(setups), feeds(feeds), elided(elided), frame_of(size_t(g.num_nodes()), -1) {
    plan->frames.push_back({});
  }

  result<std::shared_ptr<flow_plan>> run() {
    // Insertion order is topological but for back edges (NextIteration -> Merge), checked after.
    for (int v = 0; v < g.num_nodes(); ++v)
      if (setups[size_t(v)])
        RUNNEL_RETURN_IF_ERROR(assign_frame(v));
    for (int v = 0; v < g.num_nodes(); ++v)
      if (setups[size_t(v)])
        RUNNEL_RETURN_IF_ERROR(set_flow(v));
    // Slots bound to an invariant name its Enter until now: its index in the frame from here.
    for (auto& s : setups)
      if (s)
        for (auto& [slot, index] : s->frame_bound)
          index = setups[size_t(index)]->flow.constant_index;
    return plan;
  }

private:
  bool is_fed(endpoint e) const { return std::find(feeds.begin(), feeds.end(), e) != feeds.end(); }

  std::string describe(int v) const { return "'" + g.at(v).name + "' (op " + g.at(v).op + ")"; }

  /// An elided node's frame is its (forward) input's: a Merge's is its Enter's.
  endpoint through(endpoint e) const {
    while (elided[size_t(e.node)] && !is_fed(e)) {
      const node& nd = g.at(e.node);
      e = nd.inputs[0];
      if (nd.op == "Merge" && g.at(e.node).op == "NextIteration")
        e = nd.inputs[1];
    }
    return e;
  }

  /// The frame node u's outputs are in (an Enter's child frame is added on first sight).
  result<int> out_frame(int u) {
    auto& frames = plan->frames;
    const node& p = g.at(u);
    int f = frame_of[size_t(u)];
    if (p.op == "Enter") {
      auto name = get_attr<std::string>(p.attrs, "frame_name");
      auto [it, added] = frame_index.emplace(std::make_pair(f, name), int(frames.size()));
      if (added) {
        static_frame sf;
        sf.name = name;
        sf.parent = f;
        sf.parallel_iterations =
            int(std::max<int64_t>(1, get_attr<int64_t>(p.attrs, "parallel_iterations")));
        frames.push_back(std::move(sf));
      }
      return it->second;
    }
    if (p.op == "Exit") {
      if (f == 0)
        return invalid_argument("Exit " + describe(u) +
                                " is not inside a loop: no Enter leads to it");
      return frames[size_t(f)].parent;
    }
    return f;
  }

  /// Node v's frame: the one all its (forward and control) inputs are in.
  status assign_frame(int v) {
    const node& nd = g.at(v);
    int frame = -1, from = -1;
    auto agree = [&](int f, int u) -> status {
      if (frame >= 0 && f != frame)
        return invalid_argument("node " + describe(v) + " has inputs from different frames: " +
                                (from >= 0 ? describe(from) : std::string("a fed tensor")) +
                                " is in " + frame_label(plan->frames, frame) + " but " +
                                (u >= 0 ? describe(u) : std::string("a fed tensor")) + " is in " +
                                frame_label(plan->frames, f));
      frame = f;
      from = u;
      return {};
    };
    for (auto e : nd.inputs) {
      if (g.at(e.node).op == "NextIteration")
        continue; // a back edge (checked by set_flow)
      e = through(e);
      if (is_fed(e)) {
        RUNNEL_RETURN_IF_ERROR(agree(0, -1));
        continue;
      }
      if (!setups[size_t(e.node)])
        continue; // bound
      RUNNEL_ASSIGN_OR_RETURN(int f, out_frame(e.node));
      RUNNEL_RETURN_IF_ERROR(agree(f, e.node));
    }
    for (int c : nd.control_inputs) {
      c = through({c, 0}).node;
      if (!setups[size_t(c)])
        continue;
      RUNNEL_ASSIGN_OR_RETURN(int f, out_frame(c));
      RUNNEL_RETURN_IF_ERROR(agree(f, c));
    }
    frame_of[size_t(v)] = std::max(frame, 0);
    return {};
  }

  /// Node v's part in its frame: an Enter's child frame, an Exit's place among its frame's exits,
  /// a Merge's back edges.
  status set_flow(int v) {
    auto& setup = setups[size_t(v)];
    auto& frames = plan->frames;
    const node& nd = g.at(v);
    auto& fl = setup->flow;
    fl.kind = kind_of(nd.op);
    int f = frame_of[size_t(v)];
    switch (fl.kind) {
      case flow_kind::enter: {
        RUNNEL_ASSIGN_OR_RETURN(fl.child_frame, out_frame(v));
        fl.is_constant = get_attr<bool>(nd.attrs, "is_constant");
        frames[size_t(fl.child_frame)].enters++;
        if (fl.binds)
          fl.constant_index = frames[size_t(fl.child_frame)].constants++;
        break;
      }
      case flow_kind::exit:
        RUNNEL_RETURN_IF_ERROR(out_frame(v).error());
        fl.exit_index = int(frames[size_t(f)].exits.size());
        frames[size_t(f)].exits.push_back(setup);
        break;
      case flow_kind::next_iteration:
        if (f == 0)
          return invalid_argument("NextIteration " + describe(v) +
                                  " is outside any loop: no Enter leads to it");
        break;
      case flow_kind::merge:
        RUNNEL_RETURN_IF_ERROR(set_merge_flow(v, f, fl));
        break;
      default:
        break;
    }
    setup->dynamic = true;
    return {};
  }

  /// Which of Merge v's inputs are back edges (a NextIteration's value, from the Merge's frame).
  status set_merge_flow(int v, int f, flow_node& fl) {
    const node& nd = g.at(v);
    if (!nd.control_inputs.empty())
      return invalid_argument("Merge " + describe(v) + " has control inputs (not supported)");
    fl.back_edge.assign(nd.inputs.size(), 0);
    fl.merge_index.clear();
    for (size_t k = 0; k < nd.inputs.size(); ++k) {
      auto e = nd.inputs[k];
      bool back =
          g.at(e.node).op == "NextIteration" && (setups[size_t(e.node)] || elided[size_t(e.node)]);
      int from = -1; // the frame the NextIteration's value is in
      if (back && elided[size_t(e.node)]) {
        RUNNEL_ASSIGN_OR_RETURN(from, out_frame(through(e).node));
      } else if (back) {
        from = frame_of[size_t(e.node)];
      }
      if (back && from != f)
        return invalid_argument("Merge " + describe(v) + " in " + frame_label(plan->frames, f) +
                                " takes NextIteration " + describe(e.node) + " from " +
                                frame_label(plan->frames, from));
      fl.back_edge[k] = back;
      fl.merge_index.push_back(tensor::scalar<int32_t>(int32_t(k)));
      (back ? fl.back_inputs : fl.forward_inputs)++;
    }
    if (fl.back_inputs > 0 && fl.forward_inputs == 0)
      return invalid_argument("Merge " + describe(v) +
                              " has only NextIteration inputs: the loop never starts");
    return {};
  }

  const graph& g;
  const std::vector<std::shared_ptr<node_setup>>& setups;
  const std::vector<endpoint>& feeds;
  const std::vector<char>& elided;
  std::shared_ptr<flow_plan> plan = std::make_shared<flow_plan>();
  std::map<std::pair<int, std::string>, int> frame_index; ///< (parent frame, name) -> frame
  std::vector<int> frame_of;                              ///< by node id
};

} // namespace

result<std::shared_ptr<flow_plan>>
plan_frames(const graph& g, const std::vector<std::shared_ptr<node_setup>>& setups,
            const std::vector<endpoint>& feeds, const std::vector<char>& elided) {
  return frame_planner(g, setups, feeds, elided).run();
}

// ---- frames of a step ----

frame_state::frame_state(const flow_plan& plan, int index, frame_state* p, int64_t pi)
    : info(&plan.frames[size_t(index)]), static_index(index), parent(p), parent_iter(pi),
      pending_enters(info->enters), constants(size_t(info->constants)),
      pending_constants(info->constants), exited_live(info->exits.size(), 0) {
  if (p)
    id = p->id.empty() ? info->name : p->id + ":" + std::to_string(pi) + "/" + info->name;
  outstanding.push_back(0);
  count_flow_state(1);
}

frame_state::~frame_state() {
  count_flow_state(-1);
}

flow_state::flow_state(std::shared_ptr<const flow_plan> plan, step_state& step, int64_t initial)
    : plan_(std::move(plan)), step_(step), root_(*plan_, 0, nullptr, 0) {
  root_.outstanding[0] = initial;
}

frame_state* flow_state::child(frame_state* f, int64_t iter, int index) {
  auto& slot = f->children[{iter, index}];
  if (!slot) {
    slot = std::make_unique<frame_state>(*plan_, index, f, iter);
    f->outstanding[size_t(iter - f->base)]++; // a child frame keeps its parent iteration open
  }
  return slot.get();
}

void flow_state::start_iteration(frame_state* f, std::vector<flow_message>& out) {
  f->outstanding.push_back(0);
  int64_t iter = f->base + int64_t(f->outstanding.size()) - 1;
  for (auto& inv : f->invariants)
    deliver(f, iter, *inv.consumers, inv.value, inv.dead, out);
}

void flow_state::deliver(frame_state* f, int64_t iter, const std::vector<consumer>& to,
                         const tensor& value, bool dead, std::vector<flow_message>& out,
                         bool next_only) {
  // Consumers behind an elided NextIteration take the value in the next iteration (a dead one
  // stops there, as at a NextIteration).
  int64_t end = f->base + int64_t(f->outstanding.size());
  bool park = false;
  if (iter >= end) {
    if (iter == end && iter < f->base + f->info->parallel_iterations)
      start_iteration(f, out);
    else
      park = true; // for the iteration after the window
  }
  bool any_next = false;
  for (auto& c : to) {
    any_next |= c.next_iteration;
    if (c.next_iteration != next_only || (dead && c.ignores_dead))
      continue;
    if (park) {
      f->parked.push_back({&c, dead ? tensor() : value, {f, iter, dead}});
      continue;
    }
    f->outstanding[size_t(iter - f->base)]++;
    // Until the frame's bound invariants are in, its messages wait: their consumers read them.
    // A dead message carries no value (no consumer reads one).
    (f->pending_constants > 0 ? f->held : out)
        .push_back({&c, dead ? tensor() : value, {f, iter, dead}});
  }
  if (any_next && !next_only && !dead)
    deliver(f, iter + 1, to, value, false, out, true);
}

bool flow_state::done_message(frame_state* f, int64_t iter, std::vector<flow_message>& out) {
  f->outstanding[size_t(iter - f->base)]--;
  for (;;) {
    while (!f->outstanding.empty() && f->outstanding.front() == 0 &&
           (f->base > 0 || f->pending_enters == 0)) {
      f->outstanding.pop_front();
      f->base++;
      // The window moved: the parked iteration may start now.
      if (!f->parked.empty() && int64_t(f->outstanding.size()) < f->info->parallel_iterations) {
        auto parked = std::move(f->parked);
        f->parked.clear();
        start_iteration(f, out);
        for (auto& m : parked) {
          f->outstanding[size_t(m.tag.iter - f->base)]++;
          out.push_back(std::move(m));
        }
      }
    }
    if (!f->outstanding.empty() || !f->parked.empty() || f->pending_enters > 0)
      return false;
    if (f == &root_)
      return true;
    // The frame is done: Exits that carried nothing live say so to the parent.
    frame_state* p = f->parent;
    int64_t pi = f->parent_iter;
    for (size_t k = 0; k < f->info->exits.size(); ++k) {
      if (f->exited_live[k])
        continue;
      auto& exit = *f->info->exits[k];
      deliver(p, pi, exit.consumers[0], tensor(), true, out);
      deliver(p, pi, exit.control_consumers, tensor(), true, out);
    }
    p->outstanding[size_t(pi - p->base)]--;
    p->children.erase({pi, f->static_index});
    f = p;
  }
}

bool flow_state::emit(const node_setup& s, flow_tag in, std::vector<tensor>& outputs,
                      const std::vector<char>* dead_outputs, bool node_dead,
                      std::vector<flow_message>& out) {
  std::lock_guard lock(mu_);
  frame_state* f = in.frame;
  int64_t i = in.iter;
  auto route = [&](const std::vector<consumer>& to, const tensor& value, bool dead,
                   const std::vector<int>* fetch_slots) {
    frame_state* dst = f;
    int64_t dst_iter = i;
    switch (s.flow.kind) {
      case flow_kind::enter: {
        frame_state* c = child(f, i, s.flow.child_frame);
        if (s.flow.is_constant) {
          if (s.flow.constant_index >= 0 && fetch_slots) { // the data output, once
            c->constants[size_t(s.flow.constant_index)] = {value, dead};
            if (--c->pending_constants == 0) {
              for (auto& m : c->held)
                out.push_back(std::move(m));
              c->held.clear();
            }
          }
          c->invariants.push_back({&to, value, dead});
          for (int64_t j = c->base; j < c->base + int64_t(c->outstanding.size()); ++j)
            deliver(c, j, to, value, dead, out);
          return;
        }
        dst = c;
        dst_iter = 0;
        break;
      }
      case flow_kind::exit:
        if (dead)
          return; // a dead Exit waits for the frame to end (see done_message)
        f->exited_live[size_t(s.flow.exit_index)] = 1;
        dst = f->parent;
        dst_iter = f->parent_iter;
        break;
      case flow_kind::next_iteration:
        if (dead)
          return; // deadness stops here: no next iteration
        dst_iter = i + 1;
        break;
      default:
        break;
    }
    if (fetch_slots && dst == &root_ && !dead)
      for (int k : *fetch_slots)
        step_.fetches[size_t(k)] = value;
    deliver(dst, dst_iter, to, value, dead, out);
  };
  for (int o = 0; o < s.num_outputs; ++o) {
    bool dead = node_dead || (dead_outputs && (*dead_outputs)[size_t(o)]);
    route(s.consumers[size_t(o)], outputs[size_t(o)], dead, &s.fetch_slots[size_t(o)]);
  }
  route(s.control_consumers, tensor(), node_dead, nullptr);
  if (s.flow.kind == flow_kind::enter)
    child(f, i, s.flow.child_frame)->pending_enters--;
  return done_message(f, i, out);
}

bool flow_state::consumed(flow_tag in, std::vector<flow_message>& out) {
  std::lock_guard lock(mu_);
  return done_message(in.frame, in.iter, out);
}

status flow_state::check_fetches() const {
  for (size_t k = 0; k < step_.fetches.size(); ++k)
    if (!step_.fetches[k].valid())
      return invalid_argument(
          "fetch '" + (k < plan_->fetch_names.size() ? plan_->fetch_names[k] : std::to_string(k)) +
          "' has no value: it is dead in this step (on a branch of a cond that was not taken, or "
          "inside a loop)");
  return {};
}

} // namespace runnel
