// The iterator resource behind IteratorGetNext: a dataset's stream read on a worker actor,
// (re)initialised by initialize_iterator.
#include <deque>
#include <future>

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
    worker_->post([s = state_] { s->stream.reset(); });
    worker_.reset();
  }
  const std::string& name() const override { return name_; }

  void get_next(queue_resource::dequeue_done_fn done) override {
    worker_->post([s = state_, name = name_, done = std::move(done)] {
      if (!s->returned.empty()) {
        auto e = std::move(s->returned.front());
        s->returned.pop_front();
        return done({}, std::move(e));
      }
      if (!s->stream)
        return done(failed_precondition("iterator '" + name +
                                        "' is not initialized: call initialize_iterator(runtime, "
                                        "\"" + name + "\", dataset) before running steps that "
                                        "read it"),
                    {});
      element e;
      auto more = s->stream->next(e);
      if (!more)
        return done(more.error().with_context("iterator '" + name + "'"), {});
      if (!*more)
        return done(out_of_range("end of sequence: iterator '" + name +
                                 "' has no more elements (initialize it again for another epoch)"),
                    {});
      done({}, std::move(e));
    });
  }

  void put_back(std::vector<tensor> element) override {
    worker_->post([s = state_, e = std::move(element)]() mutable {
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
    worker_->post([s = state_, holder, &installed] {
      s->stream = std::move(*holder);
      s->returned.clear();
      installed.set_value();
    });
    fut.wait();
    return {};
  }

private:
  struct state {
    stream_ptr stream; // touched only by the worker
    std::deque<element> returned; // given back by aborted steps, served first
  };
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

} // namespace runnel
