// Node actors: one per graph node of an executor instance. A node fires when all inputs of a
// step have arrived, runs its kernel, and sends each output to its consumers.
#include <algorithm>
#include <chrono>
#include <thread>

#include "actors/internal.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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
  done.store(1, std::memory_order_release);
  done.notify_all();
}

void step_state::wait() {
  // Short steps finish within microseconds: spin briefly so the caller need not be woken. Longer
  // steps must not have the caller compete for cores with the workers running them.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
  for (int i = 1;; ++i) {
    if (done.load(std::memory_order_acquire))
      return;
#if defined(__x86_64__)
    _mm_pause();
#endif
    if ((i & 31) == 0 && std::chrono::steady_clock::now() > deadline)
      break;
  }
  while (!done.load(std::memory_order_acquire))
    done.wait(0, std::memory_order_acquire);
}

namespace {

struct pending_step {
  int64_t id;
  step_ptr step;
  std::vector<tensor> inputs;
  int arrived = 0;
};

struct node_state {
  std::shared_ptr<node_setup> setup;
  std::vector<pending_step> pending; // a handful of steps in flight: a vector beats a map
};

void record_trace(node_setup& s, const step_ptr& step, std::chrono::steady_clock::time_point start,
                  const std::vector<tensor>& outputs) {
  auto end = std::chrono::steady_clock::now();
  int64_t bytes = 0;
  for (auto& t : outputs)
    if (t.type() != dtype::string)
      bytes += int64_t(t.bytes());
  auto& tb = *step->trace;
  std::lock_guard lock(tb.mu);
  tb.nodes.push_back({s.name, s.op, s.device, tb.since_origin_ns(start), tb.since_origin_ns(end),
                      bytes});
}

// Sends `value` to a consumer: from the node's actor when `self` is set, otherwise anonymously
// (completions that emit from the thread that completed them).
template <class T>
void deliver(node_actor::pointer self, const consumer& c, const step_ptr& step, T&& value) {
  if (self)
    self->send(c.actor, input_atom::value, step, c.slot, std::forward<T>(value));
  else
    caf::anon_send(c.actor, input_atom::value, step, c.slot, std::forward<T>(value));
}

void emit(node_actor::pointer self, node_setup& s, const step_ptr& step,
          std::vector<tensor>& outputs) {
  for (int o = 0; o < s.num_outputs; ++o) {
    auto& value = outputs[size_t(o)];
    for (int f : s.fetch_slots[size_t(o)])
      step->fetches[size_t(f)] = value;
    if (!s.send_keys.empty())
      for (auto& key : s.send_keys[size_t(o)])
        s.rendezvous->send(step->id, key, value); // shares the buffer
    auto& cs = s.consumers[size_t(o)];
    for (size_t c = 0; c < cs.size(); ++c) {
      if (c + 1 == cs.size())
        deliver(self, cs[c], step, std::move(value));
      else
        deliver(self, cs[c], step, value);
    }
  }
  for (auto& c : s.control_consumers)
    deliver(self, c, step, tensor());
  for (auto& key : s.control_send_keys)
    s.rendezvous->send(step->id, key, tensor());
  step->node_done();
}

void fire(node_actor::pointer self, node_setup& s, const step_ptr& step,
          std::vector<tensor> inputs) {
  if (step->aborted.load(std::memory_order_acquire))
    return;
  if (s.has_ref_reads) {
    for (size_t i = 0; i < s.ref_reads.size(); ++i) {
      if (!s.ref_reads[i])
        continue;
      auto value = s.ref_reads[i]->read();
      if (!value) {
        step->fail(value.error().with_context(s.describe()));
        return;
      }
      inputs[i] = std::move(value).value();
    }
  }
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
    auto* ctx = call->ctx.get();
    if (s.emit_on_completion) {
      // The completion emits from the thread that completes it (a Send's, for a Recv): one actor
      // hop per edge instead of two.
      auto sp = s.shared_from_this();
      s.kern->compute_async(*ctx, [sp, call](status st) mutable {
        if (!st.ok()) {
          call->step->fail(st.with_context(sp->describe()));
          return;
        }
        if (call->step->aborted.load(std::memory_order_acquire))
          return;
        if (call->step->trace)
          record_trace(*sp, call->step, call->started, call->ctx->outputs());
        emit(nullptr, *sp, call->step, call->ctx->outputs());
      });
      return;
    }
    node_actor handle = caf::actor_cast<node_actor>(self);
    s.kern->compute_async(*ctx, [handle, call](status st) mutable {
      call->result = std::move(st);
      caf::anon_send(handle, resume_atom::value, std::move(call));
    });
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
      s.executor->post([sp = s.shared_from_this(), step, inputs = std::move(inputs)]() mutable {
        node_setup& s = *sp;
        if (step->aborted.load(std::memory_order_acquire))
          return;
        auto started = step->trace ? std::chrono::steady_clock::now()
                                   : std::chrono::steady_clock::time_point{};
        kernel_context ctx(std::span<const tensor>(inputs.data(), size_t(s.num_inputs)),
                           s.num_outputs, s.cpu);
        ctx.set_step_id(step->id);
        status st = s.kern->compute(ctx);
        inputs.clear();
        if (!st.ok()) {
          step->fail(st.with_context(s.describe()));
          return;
        }
        if (step->trace)
          record_trace(s, step, started, ctx.outputs());
        emit(nullptr, s, step, ctx.outputs());
      });
      return;
    }
  }
  kernel_context ctx(data, s.num_outputs, s.cpu);
  ctx.set_step_id(step->id);
  status st = s.kern->compute(ctx);
  inputs.clear(); // drop input references before emitting, so consumers may reuse buffers
  if (!st.ok()) {
    step->fail(st.with_context(s.describe()));
    return;
  }
  if (step->trace)
    record_trace(s, step, started, ctx.outputs());
  emit(self, s, step, ctx.outputs());
}

} // namespace

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
        auto& pending = state->pending;
        auto it = std::find_if(pending.begin(), pending.end(),
                               [&](const pending_step& p) { return p.id == step->id; });
        if (it == pending.end()) {
          pending.push_back({step->id, step, s.bound, 0});
          it = pending.end() - 1;
        }
        it->inputs[size_t(slot)] = std::move(value);
        if (++it->arrived == s.expected) {
          auto inputs = std::move(it->inputs);
          pending.erase(it);
          fire(self, s, step, std::move(inputs));
        }
      },
      [self, state](start_atom, step_ptr& step) {
        fire(self, *state->setup, step, state->setup->bound);
      },
      [state](abort_atom, int64_t id) {
        auto& pending = state->pending;
        pending.erase(std::remove_if(pending.begin(), pending.end(),
                                     [id](const pending_step& p) { return p.id == id; }),
                      pending.end());
      },
      [self, state](resume_atom, async_call_ptr& call) {
        node_setup& s = *state->setup;
        if (!call->result.ok()) {
          call->step->fail(call->result.with_context(s.describe()));
          return;
        }
        if (call->step->aborted.load(std::memory_order_acquire))
          return;
        if (call->step->trace)
          record_trace(s, call->step, call->started, call->ctx->outputs());
        emit(self, s, call->step, call->ctx->outputs());
      },
  };
}

} // namespace runnel
