// The iterator resource behind IteratorGetNext: a dataset's stream read on a worker actor,
// (re)initialised by initialize_iterator.
#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <mutex>
#include <optional>

#include "runnel/actors/exec/internal.hpp"
#include "runnel/actors/data/stages.hpp"

namespace runnel {
namespace {

// ---- the iterator resource ----

class actor_iterator : public iterator_resource {
public:
  actor_iterator(caf::actor_system& sys, std::string name)
      : name_(std::move(name)), sys_(sys), worker_(open_context{&sys}.start_worker()),
        state_(std::make_shared<state>()) {}
  ~actor_iterator() override {
    post([s = state_] {
      std::lock_guard lock(s->mu);
      s->stream.reset();
    });
    worker_.reset();
  }
  const std::string& name() const override { return name_; }

  void get_next(queue_resource::dequeue_done_fn caller_done) override {
    // The time from the request to the element is what the step waited for its input.
    auto done = [s = state_, asked = std::chrono::steady_clock::now(),
                 caller_done = std::move(caller_done)](status st, std::vector<tensor> e) {
      s->wait_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now() - asked)
                               .count(),
                           std::memory_order_relaxed);
      if (st.ok())
        s->elements.fetch_add(1, std::memory_order_relaxed);
      caller_done(std::move(st), std::move(e));
    };
    // An element that is ready (prefetched) is served on the caller's thread: the hop to the
    // worker and back would cost the step a wake-up (~50-100 us on our VMs) for nothing. Only
    // when nothing is queued for the worker, so that requests keep their order.
    if (state_->queued.load(std::memory_order_acquire) == 0) {
      std::unique_lock lock(state_->mu, std::try_to_lock);
      if (lock.owns_lock() && state_->queued.load(std::memory_order_acquire) == 0) {
        if (auto served = serve(*state_, name_, /*wait=*/false)) {
          lock.unlock();
          return done(std::move(served->first), std::move(served->second));
        }
      }
    }
    post([s = state_, name = name_, done = std::move(done)] {
      std::unique_lock lock(s->mu);
      auto served = serve(*s, name, /*wait=*/true);
      lock.unlock();
      done(std::move(served->first), std::move(served->second));
    });
  }

  void put_back(std::vector<tensor> element) override {
    post([s = state_, e = std::move(element)]() mutable {
      std::lock_guard lock(s->mu);
      s->returned.push_front(std::move(e));
    });
  }

  /// Replaces the dataset; requests sent before this one still read the old one.
  status initialize(const dataset& ds) {
    open_context ctx{&sys_};
    auto stream = ds.node()->open(ctx);
    if (!stream)
      return stream.error().with_context("iterator '" + name_ + "'");
    std::promise<void> installed;
    auto fut = installed.get_future();
    auto holder = std::make_shared<stream_ptr>(std::move(stream).value());
    post([s = state_, holder, stages = ctx.stages, &installed] {
      std::lock_guard stream_lock(s->mu);
      s->stream = std::move(*holder);
      s->returned.clear();
      {
        std::lock_guard lock(s->stages_mu);
        s->stages = stages;
      }
      s->elements = 0;
      s->wait_ns = 0;
      installed.set_value();
    });
    fut.wait();
    return {};
  }

  bool initialized() const {
    std::lock_guard lock(state_->stages_mu);
    return state_->stages != nullptr;
  }
  iterator_stats stats() const {
    iterator_stats out;
    out.elements = state_->elements.load();
    out.wait_seconds = double(state_->wait_ns.load()) * 1e-9;
    std::shared_ptr<stage_registry> stages;
    {
      std::lock_guard lock(state_->stages_mu);
      stages = state_->stages;
    }
    if (stages)
      out.stages = snapshot_stages(*stages);
    return out;
  }

private:
  struct state {
    std::mutex mu; // the stream and `returned`: the worker's, or a caller's that finds it idle
    stream_ptr stream;
    std::deque<element> returned; // given back by aborted steps, served first
    std::atomic<int> queued{0};   // tasks posted to the worker and not finished
    std::atomic<int64_t> elements{0}, wait_ns{0};
    std::mutex stages_mu;
    std::shared_ptr<stage_registry> stages; // the current dataset's
  };
  /// The answer to a request for an element: from `returned`, else the stream (without
  /// waiting unless `wait`: nullopt when nothing is ready). Under s.mu.
  static std::optional<std::pair<status, element>> serve(state& s, const std::string& name,
                                                         bool wait) {
    if (!s.returned.empty()) {
      auto e = std::move(s.returned.front());
      s.returned.pop_front();
      return std::pair{status{}, std::move(e)};
    }
    if (!s.stream)
      return std::pair{failed_precondition("iterator '" + name +
                                           "' is not initialized: call initialize_iterator("
                                           "runtime, \"" +
                                           name +
                                           "\", dataset) before running "
                                           "steps that read it"),
                       element{}};
    element e;
    result<bool> more = false;
    if (wait) {
      more = s.stream->next(e);
    } else {
      auto ready = s.stream->try_next(e);
      if (!ready)
        return std::nullopt;
      more = std::move(*ready);
    }
    if (!more)
      return std::pair{more.error().with_context("iterator '" + name + "'"), element{}};
    if (!*more)
      return std::pair{out_of_range("end of sequence: iterator '" + name +
                                    "' has no more elements (initialize it again for another "
                                    "epoch)"),
                       element{}};
    return std::pair{status{}, std::move(e)};
  }
  /// Runs `task` on the worker, in order with the other tasks posted.
  template <class Task> void post(Task task) {
    state_->queued.fetch_add(1, std::memory_order_acq_rel);
    worker_->post([s = state_, task = std::move(task)]() mutable {
      task();
      s->queued.fetch_sub(1, std::memory_order_acq_rel);
    });
  }

  std::string name_;
  caf::actor_system& sys_;
  std::unique_ptr<stage_worker> worker_;
  std::shared_ptr<state> state_;
};

} // namespace

static std::shared_ptr<iterator_resource> make_actor_iterator(caf::actor_system& sys, std::string name) {
  return std::make_shared<actor_iterator>(sys, std::move(name));
}

// Registered with the executor (actors/exec/providers.hpp); the symbol below is what
// actors/CMakeLists.txt makes every program link.
extern "C" const int runnel_actor_iterator_linked = 1;
namespace {
[[maybe_unused]] const bool registered = (providers().iterator = make_actor_iterator, true);
} // namespace

status initialize_iterator(runtime& rt, const std::string& name, const dataset& ds) {
  auto& devices = rt.internals().devices;
  // Iterators live with the first device's resources; the others forward to it.
  auto it = devices.front().resources->find_or_create_iterator(name);
  if (!it)
    return it.error();
  return static_cast<actor_iterator&>(**it).initialize(ds);
}

result<iterator_stats> get_iterator_stats(runtime& rt, const std::string& name) {
  auto& devices = rt.internals().devices;
  auto it = devices.front().resources->find_or_create_iterator(name);
  if (!it)
    return it.error();
  auto& iterator = static_cast<const actor_iterator&>(**it);
  if (!iterator.initialized())
    return failed_precondition("iterator '" + name + "' is not initialized: " +
                               "initialize_iterator(runtime, \"" + name + "\", dataset) starts it");
  return iterator.stats();
}

} // namespace runnel
