// Node actors: one per graph node of an executor instance. A node fires when all inputs of a
// step have arrived, runs its kernel, and sends each output to its consumers.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <thread>

#include "runnel/actors/exec/firing.hpp"
#include "runnel/ops/core/float_env.hpp"
#include "runnel/ops/core/spin_wait.hpp"

namespace runnel {

void step_state::fail(status s) {
  {
    std::lock_guard lock(error_mu);
    if (aborted.load(std::memory_order_relaxed))
      return;
    error = std::move(s);
    aborted.store(true, std::memory_order_release);
  }
  if (actors)
    for (auto& a : actors->nodes)
      caf::anon_send(a, abort_atom::value, id);
  finish();
}

void step_state::finish() {
  if (finished.exchange(true, std::memory_order_acq_rel))
    return;
  if (on_finish)
    on_finish(*this);
  done.store(1); // sequentially consistent with the load below and wait_for's (no lost wake-up)
  done.notify_all();
  if (timed_waiter.load()) {
    std::lock_guard lock(timed_mu);
    timed_cv.notify_all();
  }
}

namespace {

/// How long this thread's recent waits for a step took, in µs (a moving average).
thread_local double recent_wait_us = 0;

/// Records a wait that began at `start` and ends now.
void note_wait(std::chrono::steady_clock::time_point start) {
  double took =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  recent_wait_us = recent_wait_us == 0 ? took : 0.75 * recent_wait_us + 0.25 * took;
}

/// Short steps finish within microseconds: spin briefly so the caller need not be woken. Longer
/// steps must not have the caller compete for cores with the workers running them. A thread
/// whose steps took tens of µs of late (a trivial step whose worker had gone to sleep and had to
/// be woken) spins up to twice that: caught spinning, its next step comes while a worker still
/// polls, where waking up on both sides each step would keep every step that slow (a Python
/// run loop: 13-33 µs a run against 3-4). True when `done` was seen (the wait is recorded).
bool spin_until_done(const std::atomic<uint32_t>& done,
                     std::chrono::steady_clock::time_point start) {
  double budget_us = recent_wait_us > 10 && recent_wait_us < 50 ? 2 * recent_wait_us : 20;
  auto budget = std::chrono::nanoseconds(int64_t(budget_us * 1000)) -
                (std::chrono::steady_clock::now() - start);
  if (!spin_for([&](size_t) { return done.load(std::memory_order_acquire) != 0; }, budget))
    return false;
  note_wait(start);
  return true;
}

} // namespace

bool step_state::wait_for(std::chrono::milliseconds timeout) {
  auto start = std::chrono::steady_clock::now();
  if (spin_until_done(done, start))
    return true;
  timed_waiter.store(true);
  std::unique_lock lock(timed_mu);
  bool finished = timed_cv.wait_for(lock, timeout, [&] { return done.load() != 0; });
  if (finished)
    note_wait(start);
  return finished;
}

void step_state::wait() {
  auto start = std::chrono::steady_clock::now();
  if (spin_until_done(done, start))
    return;
  while (!done.load(std::memory_order_acquire))
    done.wait(0, std::memory_order_acquire);
  note_wait(start);
}

/// A step's inputs of a node that have arrived.
struct pending_step {
  int64_t id;
  step_ptr step;
  std::vector<tensor> inputs;
  int arrived = 0;
};

struct gathered_inputs {
  std::mutex mu;
  std::vector<pending_step> steps;
};

std::shared_ptr<gathered_inputs> make_gathered_inputs() {
  return std::make_shared<gathered_inputs>();
}

namespace {

struct node_state {
  std::shared_ptr<node_setup> setup;
  std::vector<pending_step> pending; // a handful of steps in flight: a vector beats a map
  std::vector<pending_iteration> iterations; // with control flow: per (step, frame, iteration)
};

/// The entry of `step` in `pending`, made (with `s`'s bound inputs) if it has none yet.
pending_step& pending_entry(node_setup& s, std::vector<pending_step>& pending,
                            const step_ptr& step) {
  auto it = std::find_if(pending.begin(), pending.end(),
                         [&](const pending_step& p) { return p.id == step->id; });
  if (it != pending.end())
    return *it;
  return pending.emplace_back(pending_step{step->id, step, s.bound, 0});
}

/// Puts `value` into `entry` (an element of `pending`); when that was the last input, moves the
/// inputs into `ready`, drops the entry and returns true.
bool put_input(node_setup& s, std::vector<pending_step>& pending, pending_step& entry, int32_t slot,
               tensor value, std::vector<tensor>& ready) {
  entry.inputs[size_t(slot)] = std::move(value);
  if (++entry.arrived < s.expected)
    return false;
  ready = std::move(entry.inputs);
  pending.erase(pending.begin() + (&entry - pending.data()));
  return true;
}

/// Puts `value` into its step's pending inputs of `s`; when that was the last one, moves the
/// inputs into `ready` and returns true.
bool add_input(node_setup& s, std::vector<pending_step>& pending, const step_ptr& step,
               int32_t slot, tensor value, std::vector<tensor>& ready) {
  return put_input(s, pending, pending_entry(s, pending, step), slot, std::move(value), ready);
}

/// CPU time of the calling thread, ns (for traces: what a node got of the wall time it took).
int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// `cpu_start`: thread_cpu_ns() when the node started on this thread; -1 if it ran elsewhere.
void record_trace(node_setup& s, const step_ptr& step, std::chrono::steady_clock::time_point start,
                  int64_t cpu_start, const std::vector<tensor>& outputs, flow_tag tag) {
  int64_t cpu = cpu_start < 0 ? -1 : thread_cpu_ns() - cpu_start;
  auto end = std::chrono::steady_clock::now();
  int64_t bytes = 0;
  for (auto& t : outputs)
    if (t.type() != dtype::string)
      bytes += int64_t(t.bytes());
  auto& tb = *step->trace;
  bool in_loop = tag.frame && !tag.frame->info->name.empty();
  std::lock_guard lock(tb.mu);
  tb.nodes.push_back({s.name, s.op, s.device, tb.since_origin_ns(start), tb.since_origin_ns(end),
                      bytes, in_loop ? tag.frame->info->name : std::string(),
                      in_loop ? tag.iter : -1, cpu});
}

// Sends `value` to a consumer: from the node's actor when `self` is set, otherwise anonymously
// (completions that emit from the thread that completed them). On a worker's thread (a Recv
// completed by a Send inline in its producer's turn, between devices of this process) the
// consumer goes onto that worker's own queue, as self->send puts it: sent from outside, CAF
// would wake a sleeping worker for it, which costs µs on our VMs (local_sendrecv).
template <class T>
void deliver(node_actor::pointer self, const consumer& c, const step_ptr& step, T&& value) {
  if (self)
    self->send(c.actor, input_atom::value, step, c.slot, std::forward<T>(value));
  else if (worker_unit && c.actor)
    c.actor->eq_impl(caf::make_message_id(), nullptr, worker_unit, input_atom::value, step, c.slot,
                     std::forward<T>(value));
  else
    caf::anon_send(c.actor, input_atom::value, step, c.slot, std::forward<T>(value));
}

/// How deep inline runs nest on one thread before a consumer gets a message again: bounds the
/// stack (a level takes 1.3 KB of it: 83 KB at the most), and lets other actors run between
/// stretches of a long chain. Each message costs about what 3-4 inline firings do (caf_hop
/// against node_overhead): 16 levels spent a fifth of a chain's time on them; 64 is 10-13%
/// faster on node_overhead than 16, and 256 slower than 64 (the deeper stack misses caches).
constexpr int max_inline_depth = 64;
thread_local int inline_depth = 0;

/// Whether a producer may run consumer `c` inline with `value` as its missing input: small
/// inputs (larger ones go to the device's pool from the consumer's actor) and not too deep.
bool can_inline(const consumer& c, const tensor& value) {
  if (!c.inline_node || inline_depth >= max_inline_depth)
    return false;
  size_t bytes = value.type() == dtype::string ? 0 : value.bytes();
  return bytes + c.inline_node->bound_bytes < offload_bytes;
}

/// Runs consumer `c` now, on this thread, in the producer's turn: as its actor would have on
/// the message, one firing less through the scheduler.
void run_inline(node_actor::pointer self, const consumer& c, const step_ptr& step,
                tensor value) {
  node_setup& s = *c.inline_node;
  std::vector<tensor> inputs = s.bound;
  inputs[size_t(c.slot)] = std::move(value);
  ++inline_depth;
  fire(self, s, step, std::move(inputs));
  --inline_depth;
}

/// Whether `value` takes consumer `c` (a direct_node) to its device's executor: then the
/// producer posts it there itself.
bool can_post_direct(const consumer& c, const tensor& value) {
  if (!c.direct_node)
    return false;
  size_t bytes = value.type() == dtype::string ? 0 : value.bytes();
  return bytes + c.direct_node->bound_bytes >= offload_bytes;
}

/// Fires consumer `c` from the producer's thread: fire() posts it to its device's executor
/// (can_post_direct), so no kernel runs here and no actor is needed.
void run_direct(const consumer& c, const step_ptr& step, tensor value) {
  node_setup& s = *c.direct_node;
  std::vector<tensor> inputs = s.bound;
  inputs[size_t(c.slot)] = std::move(value);
  fire(nullptr, s, step, std::move(inputs));
}

/// Consumer `c` (a gather_node) takes `value` under its lock, from the producer's thread. When
/// that completes its inputs and they take it to its device's executor, the producer fires it
/// (fire() posts it there); a last input that would leave it on this thread goes to its actor
/// instead, which computes it. A value of an aborted step is dropped, as its actor would.
void gather_input(node_actor::pointer self, const consumer& c, const step_ptr& step, tensor value) {
  node_setup& s = *c.gather_node;
  std::vector<tensor> inputs;
  bool to_actor = false;
  {
    std::lock_guard lock(s.gathered->mu);
    if (step->aborted.load(std::memory_order_acquire))
      return;
    auto& pending = s.gathered->steps;
    pending_step& entry = pending_entry(s, pending, step);
    if (entry.arrived + 1 == s.expected) {
      size_t bytes = value.type() == dtype::string ? 0 : value.bytes();
      for (size_t i = 0; i < entry.inputs.size(); ++i) {
        const tensor& t = entry.inputs[i];
        if (int32_t(i) != c.slot && t.valid() && t.type() != dtype::string)
          bytes += t.bytes();
      }
      to_actor = bytes < offload_bytes; // the entry stays: the actor adds this last input to it
    }
    if (!to_actor && !put_input(s, pending, entry, c.slot, std::move(value), inputs))
      return;
  }
  if (to_actor)
    deliver(self, c, step, std::move(value)); // outside the lock: the actor may take it at once
  else
    fire(nullptr, s, step, std::move(inputs));
}

/// Runs the kernel; a node some producer may run inline holds its lock while it computes, unless
/// its kernel keeps nothing between calls (the lock was 5% of a loop's firings: an uncontended
/// pthread mutex's lock and unlock each firing).
status compute(node_setup& s, kernel_context& ctx) {
  scoped_flush_denormals flush; // as TensorFlow's executor: ops/core/float_env.hpp
  if (!s.inlinable || s.reentrant)
    return s.kern->compute(ctx);
  std::lock_guard lock(s.compute_mu);
  return s.kern->compute(ctx);
}

} // namespace

void emit_flow(node_actor::pointer self, node_setup& s, const step_ptr& step, flow_tag tag,
               std::vector<tensor>& outputs, const std::vector<char>* dead_outputs,
               bool node_dead) {
  flow_messages out;
  bool done = step->flow->emit(s, tag, outputs, dead_outputs, node_dead, *out);
  for (auto& t : outputs)
    t = tensor(); // before the step can end, as in emit()
  dispatch_flow(self, step, *out, done);
}

static void emit(node_actor::pointer self, node_setup& s, const step_ptr& step,
                 std::vector<tensor>& outputs, flow_tag tag) {
  if (s.dynamic) {
    // A Recv that got another process's dead value (see fire_flow) passes deadness on.
    bool dead = s.crosses_processes && s.num_outputs == 1 && !outputs[0].valid();
    emit_flow(self, s, step, tag, outputs, nullptr, dead);
    return;
  }
  if (s.crosses_processes && s.num_outputs == 1 && !outputs[0].valid()) {
    step->fail(invalid_argument("received a dead value (from a cond branch not taken on the "
                                "sending task) where this task's graph has no control flow to "
                                "pass deadness on")
                   .with_context(s.describe()));
    return;
  }
  for (int o = 0; o < s.num_outputs; ++o) {
    auto& value = outputs[size_t(o)];
    // A GPU's output leaves the device for fetches and CPUs as a host copy; its consumers on
    // the same GPU get the device tensor, and so do other GPUs of this process (they copy it
    // device to device).
    tensor host_copy;
    bool to_host = !s.fetch_slots[size_t(o)].empty();
    if (!s.send_keys.empty())
      for (char gpu : s.send_to_gpu[size_t(o)])
        to_host |= !gpu;
    if (s.gpu && value.valid() && !value.host_readable() && to_host) {
      auto h = s.gpu->read_to_host(value);
      if (!h.ok()) {
        step->fail(h.error().with_context(s.describe()));
        return;
      }
      host_copy = std::move(h).value();
    }
    const tensor& outside = host_copy.valid() ? host_copy : value;
    for (int f : s.fetch_slots[size_t(o)])
      step->fetches[size_t(f)] = outside;
    if (!s.send_keys.empty())
      for (size_t k = 0; k < s.send_keys[size_t(o)].size(); ++k) // shares the buffer
        s.rendezvous->send(step->id, s.send_keys[size_t(o)][k],
                           s.send_to_gpu[size_t(o)][k] ? value : outside);
    auto& cs = s.consumers[size_t(o)];
    for (size_t c = 0; c < cs.size(); ++c) {
      bool last = c + 1 == cs.size();
      if (can_inline(cs[c], value))
        run_inline(self, cs[c], step, last ? std::move(value) : value);
      else if (can_post_direct(cs[c], value))
        run_direct(cs[c], step, last ? std::move(value) : value);
      else if (cs[c].gather_node)
        gather_input(self, cs[c], step, last ? std::move(value) : value);
      else if (last)
        deliver(self, cs[c], step, std::move(value));
      else
        deliver(self, cs[c], step, value);
    }
  }
  for (auto& c : s.control_consumers)
    deliver(self, c, step, tensor());
  for (auto& key : s.control_send_keys)
    s.rendezvous->send(step->id, key, tensor());
  // The outputs' references go before the step can end: a fetch whose buffer no one else holds
  // is the caller's to change (a writeable NumPy array) as soon as run() returns.
  for (auto& t : outputs)
    t = tensor();
  step->node_done();
}

bool read_variables(node_setup& s, const step_ptr& step, std::vector<tensor>& inputs) {
  if (!s.has_ref_reads)
    return true;
  for (size_t i = 0; i < s.ref_reads.size(); ++i) {
    if (!s.ref_reads[i])
      continue;
    // A node on a CPU reads a GPU's variable through a copy in host memory.
    auto value = s.gpu ? s.ref_reads[i]->read() : s.ref_reads[i]->read_host();
    if (!value) {
      step->fail(value.error().with_context(s.describe()));
      return false;
    }
    inputs[i] = std::move(value).value();
  }
  return true;
}

/// CPU kernels read their inputs through host pointers: an input in device memory is an error
/// naming the input, never a dereference of a device pointer.
static status check_host_inputs(std::span<const tensor> inputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].host_readable())
      return failed_precondition("input " + std::to_string(i) + " (" +
                                 std::string(name(inputs[i].type())) +
                                 inputs[i].shape().to_string() + ") is in " +
                                 inputs[i].memory_name() +
                                 ", which a CPU kernel cannot read; a transfer must bring it "
                                 "to the host");
  return {};
}

void fire(node_actor::pointer self, node_setup& s, const step_ptr& step,
          std::vector<tensor> inputs, flow_tag tag) {
  if (step->aborted.load(std::memory_order_acquire))
    return;
  if (!read_variables(s, step, inputs))
    return;
  std::span<const tensor> data(inputs.data(), size_t(s.num_inputs));
  auto started = step->trace ? std::chrono::steady_clock::now()
                             : std::chrono::steady_clock::time_point{};
  if (s.kern->is_async()) {
    auto call = std::make_shared<async_call>();
    call->step = step;
    call->started = started;
    call->inputs = std::move(inputs);
    call->ctx = std::make_unique<kernel_context>(
        std::span<const tensor>(call->inputs.data(), size_t(s.num_inputs)), s.num_outputs, s.cpu);
    call->ctx->set_abort_flag(&step->aborted);
    call->ctx->set_step_id(step->id);
    call->ctx->set_step_container(&step->resources);
    if (s.crosses_processes && tag.frame && !tag.frame->id.empty())
      call->ctx->set_frame_iter(tag.frame->id + ":" + std::to_string(tag.iter));
    auto* ctx = call->ctx.get();
    if (s.emit_on_completion) {
      // The completion emits from the thread that completes it (a Send's, for a Recv): one actor
      // hop per edge instead of two.
      auto sp = s.shared_from_this();
      s.kern->compute_async(*ctx, [sp, call, tag](status st) mutable {
        call->inputs.clear(); // before the step can end: a fed loan goes back when run() returns
        if (!st.ok()) {
          call->step->fail(st.with_context(sp->describe()));
          return;
        }
        if (call->step->aborted.load(std::memory_order_acquire))
          return;
        if (call->step->trace)
          record_trace(*sp, call->step, call->started, -1, call->ctx->outputs(), tag);
        emit(nullptr, *sp, call->step, call->ctx->outputs(), tag);
      });
      return;
    }
    call->tag = tag;
    node_actor handle = caf::actor_cast<node_actor>(self);
    s.kern->compute_async(*ctx, [handle, call](status st) mutable {
      call->result = std::move(st);
      caf::anon_send(handle, resume_atom::value, std::move(call));
    });
    return;
  }
  if (status st = s.kern->accepts_device_inputs() ? status{} : check_host_inputs(data); !st.ok()) {
    step->fail(st.with_context(s.describe()));
    return;
  }
  if (s.executor) {
    size_t bytes = 0;
    for (auto& t : data)
      if (t.type() != dtype::string)
        bytes += t.bytes();
    if (bytes >= offload_bytes) {
      // The device's own threads compute it and emit the outputs; this actor goes on with other
      // steps' messages meanwhile.
      s.executor->post([sp = s.shared_from_this(), step, inputs = std::move(inputs), tag]() mutable {
        node_setup& s = *sp;
        if (step->aborted.load(std::memory_order_acquire))
          return;
        auto started = step->trace ? std::chrono::steady_clock::now()
                                   : std::chrono::steady_clock::time_point{};
        int64_t cpu_started = step->trace ? thread_cpu_ns() : -1;
        kernel_context ctx(std::span<const tensor>(inputs.data(), size_t(s.num_inputs)),
                           s.num_outputs, s.cpu);
        ctx.set_step_id(step->id);
        ctx.set_step_container(&step->resources);
        status st = compute(s, ctx);
        inputs.clear();
        if (!st.ok()) {
          step->fail(st.with_context(s.describe()));
          return;
        }
        if (step->trace)
          record_trace(s, step, started, cpu_started, ctx.outputs(), tag);
        emit(nullptr, s, step, ctx.outputs(), tag);
      });
      return;
    }
  }
  int64_t cpu_started = step->trace ? thread_cpu_ns() : -1;
  kernel_context ctx(data, s.num_outputs, s.cpu);
  ctx.set_step_id(step->id);
  ctx.set_step_container(&step->resources);
  status st = compute(s, ctx);
  inputs.clear(); // drop input references before emitting, so consumers may reuse buffers
  if (!st.ok()) {
    step->fail(st.with_context(s.describe()));
    return;
  }
  if (step->trace)
    record_trace(s, step, started, cpu_started, ctx.outputs(), tag);
  emit(self, s, step, ctx.outputs(), tag);
}

node_actor::behavior_type node_behavior(node_actor::pointer self,
                                        std::shared_ptr<node_setup> setup) {
  auto state = std::make_shared<node_state>();
  state->setup = std::move(setup);
  return {
      [self, state](input_atom, step_ptr& step, int32_t slot, tensor& value) {
        node_setup& s = *state->setup;
        if (step->aborted.load(std::memory_order_acquire))
          return;
        if (s.expected == 1) {
          std::vector<tensor> inputs = s.bound;
          inputs[size_t(slot)] = std::move(value);
          fire(self, s, step, std::move(inputs));
          return;
        }
        std::vector<tensor> inputs;
        if (auto& shared = s.gathered) {
          std::unique_lock lock(shared->mu);
          if (step->aborted.load(std::memory_order_acquire))
            return; // the abort may have dropped this node's inputs already: add none after it
          if (!add_input(s, shared->steps, step, slot, std::move(value), inputs))
            return;
        } else if (!add_input(s, state->pending, step, slot, std::move(value), inputs)) {
          return;
        }
        fire(self, s, step, std::move(inputs));
      },
      [self, state](input_atom, step_ptr& step, int32_t slot, tensor& value, flow_tag tag) {
        if (step->aborted.load(std::memory_order_acquire))
          return;
        on_flow_input(self, &state->iterations, *state->setup, step, slot, std::move(value), tag);
      },
      [self, state](start_atom, step_ptr& step) {
        node_setup& s = *state->setup;
        if (s.dynamic)
          fire_flow(self, s, step, s.bound, step->flow->root_tag());
        else
          fire(self, s, step, s.bound);
      },
      [state](abort_atom, int64_t id) {
        auto& pending = state->pending;
        pending.erase(std::remove_if(pending.begin(), pending.end(),
                                     [id](const pending_step& p) { return p.id == id; }),
                      pending.end());
        auto drop = [id](std::vector<pending_iteration>& its) {
          its.erase(std::remove_if(its.begin(), its.end(),
                                   [id](const pending_iteration& p) { return p.step == id; }),
                    its.end());
        };
        drop(state->iterations);
        if (auto& shared = state->setup->flow_inputs) {
          std::lock_guard lock(shared->mu);
          drop(shared->iterations);
        }
        if (auto& shared = state->setup->gathered) {
          std::lock_guard lock(shared->mu);
          shared->steps.erase(std::remove_if(shared->steps.begin(), shared->steps.end(),
                                             [id](const pending_step& p) { return p.id == id; }),
                              shared->steps.end());
        }
      },
      [self, state](resume_atom, async_call_ptr& call) {
        node_setup& s = *state->setup;
        call->inputs.clear(); // before the step can end, as in fire()
        if (!call->result.ok()) {
          call->step->fail(call->result.with_context(s.describe()));
          return;
        }
        if (call->step->aborted.load(std::memory_order_acquire))
          return;
        if (call->step->trace)
          record_trace(s, call->step, call->started, -1, call->ctx->outputs(), call->tag);
        emit(self, s, call->step, call->ctx->outputs(), call->tag);
      },
  };
}

} // namespace runnel
