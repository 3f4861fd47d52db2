// Dataset stages that overlap work: prefetch (a producer on its own worker filling a bounded
// buffer) and map with parallelism (chunks mapped on workers, handed out in order), and the
// workers themselves: detached typed actors of the runtime's actor system, or threads.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "runnel/actors/data/autotune.hpp"
#include "runnel/actors/data/stages.hpp"
#include "runnel/actors/exec/internal.hpp"

namespace runnel {
namespace {

using task_atom = caf::atom_constant<caf::atom("dstask")>;
using task_ptr = std::shared_ptr<std::function<void()>>;

} // namespace
} // namespace runnel

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(runnel::task_ptr)

namespace runnel {
namespace {

/// A stage worker: a detached typed actor (its own thread, so tasks may block).
using worker_actor = caf::typed_actor<caf::reacts_to<task_atom, task_ptr>>;

// (The unused argument: CAF 0.17 dereferences a null tuple for argument-less function actors,
// which UBSan reports.)
worker_actor::behavior_type worker_behavior(worker_actor::pointer, int) {
  return {[](task_atom, task_ptr& t) { (*t)(); }};
}

class actor_worker : public stage_worker {
public:
  explicit actor_worker(caf::actor_system& sys) : actor_(sys.spawn<caf::detached>(worker_behavior, 0)) {}
  ~actor_worker() override { caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown); }
  void post(std::function<void()> task) override {
    caf::anon_send(actor_, task_atom::value, std::make_shared<std::function<void()>>(std::move(task)));
  }

private:
  worker_actor actor_;
};

/// A dataset read without a runtime has no actor system: a thread of its own, detached, that
/// runs what was posted before the worker was destroyed, then ends.
class thread_worker : public stage_worker {
public:
  thread_worker() : s_(std::make_shared<shared>()) {
    std::thread([s = s_] {
      std::unique_lock lock(s->mu);
      for (;;) {
        s->cv.wait(lock, [&] { return s->stop || !s->tasks.empty(); });
        if (s->tasks.empty())
          return;
        auto task = std::move(s->tasks.front());
        s->tasks.pop_front();
        lock.unlock();
        task();
        task = nullptr; // what the task holds goes now, not with the next one
        lock.lock();
      }
    }).detach();
  }
  ~thread_worker() override {
    std::lock_guard lock(s_->mu);
    s_->stop = true;
    s_->cv.notify_one();
  }
  void post(std::function<void()> task) override {
    std::lock_guard lock(s_->mu);
    s_->tasks.push_back(std::move(task));
    s_->cv.notify_one();
  }

private:
  struct shared {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> tasks;
    bool stop = false;
  };
  std::shared_ptr<shared> s_;
};

// ---- prefetch: an actor filling a bounded buffer ----

struct chunk_buffer {
  std::mutex mu;
  std::condition_variable can_put, can_take;
  std::deque<std::vector<element>> chunks;
  size_t count = 0;
  size_t capacity = 1;
  bool finished = false; // the producer is done (end or error)
  bool cancelled = false;
  status error;
};

class prefetch_stream : public element_stream {
public:
  /// `capacity`: elements, or dataset::autotune.
  prefetch_stream(open_context& ctx, stream_ptr upstream, int64_t capacity)
      : buf_(std::make_shared<chunk_buffer>()) {
    if (capacity == dataset::autotune)
      knob_ = std::make_unique<autotune_knob>(2, 1, max_autotuned_buffer, /*multiply=*/true);
    buf_->capacity = size_t(knob_ ? knob_->value() : std::max<int64_t>(1, capacity));
    worker_ = ctx.start_worker();
    auto buf = buf_;
    // The producer owns the upstream stages and runs them until the end, an error, or a cancel.
    worker_->post([buf, up = std::shared_ptr<element_stream>(std::move(upstream))] {
      size_t chunk;
      {
        std::lock_guard lock(buf->mu);
        chunk = std::min(chunk_size, buf->capacity);
      }
      for (;;) {
        std::vector<element> c;
        status st = up->next_chunk(c, chunk);
        std::unique_lock lock(buf->mu);
        if (!st.ok() || c.empty()) {
          buf->error = st;
          buf->finished = true;
          buf->can_take.notify_all();
          return;
        }
        buf->can_put.wait(lock, [&] { return buf->cancelled || buf->count < buf->capacity; });
        if (buf->cancelled)
          return;
        buf->count += c.size();
        buf->chunks.push_back(std::move(c));
        buf->can_take.notify_one();
        chunk = std::min(chunk_size, buf->capacity); // autotune may have grown it
      }
    });
  }
  ~prefetch_stream() override {
    {
      std::lock_guard lock(buf_->mu);
      buf_->cancelled = true;
      buf_->chunks.clear();
    }
    buf_->can_put.notify_all();
    worker_.reset(); // it stops once the producer sees the cancel
  }
  std::pair<int64_t, int64_t> buffer_fill() const override {
    std::lock_guard lock(buf_->mu);
    return {int64_t(buf_->count), int64_t(buf_->capacity)};
  }
  int64_t autotuned() const override { return knob_ ? knob_->value() : -1; }
  status next_chunk(std::vector<element>& out, size_t max) override {
    std::unique_lock lock(buf_->mu);
    if (buf_->chunks.empty() && !buf_->finished)
      missed_ = true;
    buf_->can_take.wait(lock, [&] { return !buf_->chunks.empty() || buf_->finished; });
    return take(lock, out, max);
  }
  std::optional<status> try_next_chunk(std::vector<element>& out, size_t max) override {
    std::unique_lock lock(buf_->mu);
    if (buf_->chunks.empty() && !buf_->finished) {
      missed_ = true; // the take that follows waited
      return std::nullopt;
    }
    return take(lock, out, max);
  }

private:
  /// Moves up to `max` buffered elements to `out` (or reports the end), then lets the producer
  /// go on.
  status take(std::unique_lock<std::mutex>& lock, std::vector<element>& out, size_t max) {
    if (buf_->chunks.empty())
      return buf_->error;
    auto& front = buf_->chunks.front();
    if (front.size() <= max && out.empty()) {
      out = std::move(front);
      buf_->chunks.pop_front();
    } else {
      size_t n = std::min(max, front.size());
      std::move(front.begin(), front.begin() + long(n), std::back_inserter(out));
      front.erase(front.begin(), front.begin() + long(n));
      if (front.empty())
        buf_->chunks.pop_front();
    }
    buf_->count -= std::min(buf_->count, out.size());
    if (knob_) {
      // Never more than autotune_buffer_bytes of elements like the largest seen.
      int64_t bytes = 1;
      for (auto& t : out.back())
        bytes += int64_t(t.bytes());
      if (bytes > largest_element_) {
        largest_element_ = bytes;
        knob_->cap(std::max<int64_t>(1, autotune_buffer_bytes / bytes));
        buf_->capacity = size_t(knob_->value());
      }
      window_.take(missed_, int64_t(out.size()));
      if (window_.maybe_observe(*knob_))
        buf_->capacity = size_t(knob_->value());
    }
    missed_ = false;
    lock.unlock();
    buf_->can_put.notify_one();
    return {};
  }

  static constexpr int64_t max_autotuned_buffer = 64;

  std::shared_ptr<chunk_buffer> buf_;
  std::unique_ptr<stage_worker> worker_;
  // autotune: the buffer's size, and what the consumer saw since it last changed (under mu).
  std::unique_ptr<autotune_knob> knob_;
  autotune_window window_;
  bool missed_ = false;
  int64_t largest_element_ = 0;
};

class prefetch_node : public unary_node {
public:
  prefetch_node(node_ptr in, int64_t n) : unary_node(std::move(in)), n_(n) {}
  std::string describe() const override { return "prefetch(" + autotune_label(n_) + ")"; }
  result<stream_ptr> open_stream(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(std::make_unique<prefetch_stream>(ctx, std::move(up), n_));
  }

private:
  int64_t n_;
};

// ---- map, filter ----

class map_stream : public element_stream {
public:
  map_stream(stream_ptr in, map_fn fn) : in_(std::move(in)), fn_(std::move(fn)) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    size_t start = out.size();
    RUNNEL_RETURN_IF_ERROR(in_->next_chunk(out, max));
    for (size_t i = start; i < out.size(); ++i) {
      auto r = fn_(std::move(out[i]));
      if (!r)
        return r.error().with_context("map");
      out[i] = std::move(r).value();
    }
    return {};
  }

private:
  stream_ptr in_;
  map_fn fn_;
};

/// Chunks pulled in order, mapped on worker actors, handed out in order.
class parallel_map_stream : public element_stream {
public:
  /// `parallelism`: workers, or dataset::autotune.
  parallel_map_stream(open_context& ctx, stream_ptr in, map_fn fn, int parallelism)
      : in_(std::move(in)), fn_(std::make_shared<map_fn>(std::move(fn))),
        workers_(ctx, parallelism) {}
  int64_t autotuned() const override { return workers_.autotuned(); }
  ~parallel_map_stream() override {
    for (auto& t : in_flight_) { // workers still hold tasks: wait so nothing outlives its data
      std::unique_lock lock(t->mu);
      t->cv.wait(lock, [&] { return t->done; });
    }
    workers_.stop();
  }
  status next_chunk(std::vector<element>& out, size_t max) override {
    // Keep two chunks per worker in flight.
    while (!ended_ && in_flight_.size() < 2 * workers_.active()) {
      auto t = std::make_shared<task>();
      status st = in_->next_chunk(t->items, std::min(max, chunk_size));
      if (!st.ok()) {
        ended_ = true;
        end_error_ = st;
        break;
      }
      if (t->items.empty()) {
        ended_ = true;
        break;
      }
      workers_.post([t, fn = fn_] {
        status st;
        for (auto& e : t->items) {
          auto r = (*fn)(std::move(e));
          if (!r) {
            st = r.error().with_context("map");
            break;
          }
          e = std::move(r).value();
        }
        std::lock_guard lock(t->mu);
        t->result = st;
        t->done = true;
        t->cv.notify_all();
      });
      in_flight_.push_back(std::move(t));
    }
    if (in_flight_.empty())
      return end_error_;
    auto t = std::move(in_flight_.front());
    in_flight_.pop_front();
    std::unique_lock lock(t->mu);
    bool starved = !t->done;
    t->cv.wait(lock, [&] { return t->done; });
    if (!t->result.ok())
      return t->result;
    workers_.took(starved, int64_t(t->items.size()));
    std::move(t->items.begin(), t->items.end(), std::back_inserter(out));
    return {};
  }

private:
  struct task {
    std::vector<element> items;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    status result;
  };
  stream_ptr in_;
  std::shared_ptr<map_fn> fn_;
  stage_workers workers_;
  std::deque<std::shared_ptr<task>> in_flight_;
  bool ended_ = false;
  status end_error_;
};

} // namespace

std::unique_ptr<stage_worker> open_context::start_worker() const {
  if (sys)
    return std::make_unique<actor_worker>(*sys);
  return std::make_unique<thread_worker>();
}

stream_ptr make_prefetch_stream(open_context& ctx, stream_ptr upstream, size_t capacity) {
  return std::make_unique<prefetch_stream>(ctx, std::move(upstream), int64_t(capacity));
}

node_ptr make_prefetch_node(node_ptr in, int64_t n) {
  return std::make_shared<prefetch_node>(std::move(in), n);
}

stream_ptr make_map_stream(open_context& ctx, stream_ptr in, map_fn fn, int parallelism) {
  if (parallelism <= 1 && parallelism != dataset::autotune)
    return std::make_unique<map_stream>(std::move(in), std::move(fn));
  return std::make_unique<parallel_map_stream>(ctx, std::move(in), std::move(fn), parallelism);
}

} // namespace runnel
