#include "runnel/actors/data/coordinator.hpp"

#include <condition_variable>
#include <mutex>

#include "runnel/actors/exec/internal.hpp"
#include "runnel/ops/graph/builder.hpp"

namespace runnel {

using rerun_atom = caf::atom_constant<caf::atom("rerun")>;

struct coordinator::impl {
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  bool stop = false;
  status error;
  int running = 0;                          ///< loops still going
  std::vector<std::string> running_names;   ///< for join's error
  std::vector<std::function<void()>> on_stop; ///< start the cancel ops (must not block)

  void request_stop(status why) {
    std::vector<std::function<void()>> hooks;
    {
      std::lock_guard lock(mu);
      if (!why.ok() && error.ok())
        error = why;
      if (stop)
        return;
      stop = true;
      hooks = std::move(on_stop);
      cv.notify_all();
    }
    for (auto& h : hooks)
      h();
  }

  void record_error(status why) {
    std::lock_guard lock(mu);
    if (error.ok())
      error = std::move(why);
    cv.notify_all();
  }

  void loop_ended(const std::string& name) {
    std::lock_guard lock(mu);
    --running;
    auto it = std::find(running_names.begin(), running_names.end(), name);
    if (it != running_names.end())
      running_names.erase(it);
    cv.notify_all();
  }
};

coordinator::coordinator() : impl_(std::make_shared<impl>()) {}

coordinator::~coordinator() {
  request_stop();
  (void)join();
}

void coordinator::request_stop(status why) {
  impl_->request_stop(std::move(why));
}

bool coordinator::should_stop() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stop;
}

bool coordinator::wait_for_stop(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->stop; });
}

status coordinator::join(std::chrono::milliseconds grace) {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->stop || impl_->running == 0; });
  if (!impl_->cv.wait_for(lock, grace, [&] { return impl_->running == 0; })) {
    std::string names;
    for (auto& n : impl_->running_names)
      names += (names.empty() ? "" : ", ") + n;
    status late = deadline_exceeded("coordinator: " + std::to_string(impl_->running) +
                                    " queue runner loops did not stop within " +
                                    std::to_string(grace.count()) + " ms: " + names);
    return impl_->error.ok() ? late : impl_->error;
  }
  return impl_->error;
}

status coordinator::error() const {
  std::lock_guard lock(impl_->mu);
  return impl_->error;
}

queue_runner::queue_runner(const graph_queue& q, std::vector<operation> enqueue_ops,
                           const std::vector<graph_queue>& also_close)
    : queue_name_(q.name()), enqueue_ops_(std::move(enqueue_ops)) {
  if (enqueue_ops_.empty())
    throw error(invalid_argument("queue_runner for '" + queue_name_ + "' needs an enqueue op"));
  std::vector<operation> closes{q.close(false, queue_name_ + "_runner_close")};
  std::vector<operation> cancels{q.close(true, queue_name_ + "_runner_cancel")};
  for (auto& other : also_close) {
    closes.push_back(other.close(false, other.name() + "_runner_close"));
    cancels.push_back(other.close(true, other.name() + "_runner_cancel"));
  }
  graph& g = q.handle().owner();
  close_op_ = closes.size() == 1 ? closes[0] : group(g, closes, queue_name_ + "_runner_closes");
  cancel_op_ =
      cancels.size() == 1 ? cancels[0] : group(g, cancels, queue_name_ + "_runner_cancels");
}

namespace {

using ended_atom = caf::atom_constant<caf::atom("ended")>;

/// What the loops of one started runner share.
struct runner_state {
  session* s = nullptr;
  std::shared_ptr<coordinator::impl> coord;
  operation close_op;
  std::atomic<int> loops_left{0};
};

using loop_actor =
    caf::typed_actor<caf::reacts_to<rerun_atom>, caf::reacts_to<ended_atom, status>>;

loop_actor::behavior_type loop_behavior(loop_actor::pointer self,
                                        std::shared_ptr<runner_state> st, operation op) {
  return {
      [self, st, op](rerun_atom) {
        {
          std::lock_guard lock(st->coord->mu);
          if (st->coord->stop) {
            caf::anon_send(caf::actor_cast<loop_actor>(self), ended_atom::value,
                           cancelled("the coordinator stopped"));
            return;
          }
        }
        loop_actor handle = caf::actor_cast<loop_actor>(self);
        // The completion runs on a runtime thread: it only sends a message back here.
        st->s->run_callback({}, {}, {op}, [handle](result<std::vector<tensor>> r) {
          if (r.ok())
            caf::anon_send(handle, rerun_atom::value);
          else
            caf::anon_send(handle, ended_atom::value, r.error());
        });
      },
      [self, st, op](ended_atom, status why) {
        std::string name = op.name();
        auto code = why.code();
        bool exhausted = code == error_code::out_of_range || code == error_code::cancelled;
        bool stopping;
        {
          std::lock_guard lock(st->coord->mu);
          stopping = st->coord->stop;
        }
        if (!exhausted && !stopping)
          st->coord->request_stop(why.with_context("queue runner op '" + name + "'"));
        // At a stop the cancel op has closed the queue already.
        bool close_queue = exhausted && !stopping;
        if (st->loops_left.fetch_sub(1) == 1 && close_queue) {
          // The last loop of this runner closes its queue: consumers drain it, then get
          // out_of_range.
          st->s->run_callback({}, {}, {st->close_op}, [st, name](result<std::vector<tensor>> r) {
            if (!r && r.error().code() != error_code::cancelled)
              st->coord->record_error(r.error());
            st->coord->loop_ended(name);
          });
        } else {
          st->coord->loop_ended(name);
        }
        self->quit();
      },
  };
}

} // namespace

status queue_runner::start(session& s, coordinator& coord) const {
  auto& c = coord.internals();
  auto st = std::make_shared<runner_state>();
  st->s = &s;
  st->coord = std::shared_ptr<coordinator::impl>(coord.shared_impl());
  st->close_op = close_op_;
  st->loops_left = int(enqueue_ops_.size());
  {
    std::lock_guard lock(c.mu);
    if (c.stop)
      return cancelled("queue_runner for '" + queue_name_ + "': the coordinator is stopped");
    c.running += int(enqueue_ops_.size());
    for (auto& op : enqueue_ops_)
      c.running_names.push_back(op.name());
    // At stop, close the queue cancelling pending enqueues, so no loop stays blocked.
    c.on_stop.push_back([&s, cancel = cancel_op_] {
      s.run_callback({}, {}, {cancel}, [](result<std::vector<tensor>>) {});
    });
  }
  auto& sys = *s.runtime_internals().system;
  for (auto& op : enqueue_ops_) {
    // Detached: a loop may block briefly in session::run_callback (while another thread
    // instantiates a graph), which must never hold one of the scheduler's threads.
    auto a = sys.spawn<caf::detached>(loop_behavior, st, op);
    caf::anon_send(a, rerun_atom::value);
  }
  return {};
}

} // namespace runnel
