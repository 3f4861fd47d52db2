#include "runnel/actors/exec/session.hpp"

#include <cstdio>
#include <map>
#include <semaphore>
#include <unordered_map>

#include "runnel/actors/exec/firing.hpp"
#include "runnel/actors/exec/session_impl.hpp"
#include "runnel/placement/cost_model.hpp"
#include "runnel/placement/partition.hpp"
#include "runnel/placement/placer.hpp"

namespace runnel {
namespace {

int64_t encode(endpoint e) {
  return (int64_t(e.node) << 16) | e.index;
}

} // namespace

std::mutex shared_costs_mu;

result<step_ptr> session::impl::start(const feed_list& feeds, const std::vector<output>& fetches,
                                      const std::vector<operation>& targets,
                                      std::function<void(step_state&)> extra_finish,
                                      std::shared_ptr<trace_buffer> trace, int64_t step_id) {
  // Until the instance is found or built, this reads the graph, to which another thread may be
  // adding nodes (graph::lock_for_reading); the step itself reads only the instance.
  auto reading = g.lock_for_reading();
  std::vector<int64_t> key;
  key.reserve(feeds.size() + fetches.size() + targets.size() + 3);
  key.push_back(g.num_nodes());
  std::vector<endpoint> feed_eps, fetch_eps;
  std::vector<int> target_ids;
  for (auto& [o, t] : feeds) {
    if (&o.owner() != &g)
      return invalid_argument("feed '" + o.name() + "' belongs to another graph");
    auto& expected = o.shape();
    if (t.type() != o.type() || !t.shape().is_compatible_with(expected))
      return invalid_argument("feed '" + o.name() + "' expects a " + std::string(name(o.type())) +
                              " tensor of shape " + expected.to_string() + ", got " +
                              std::string(name(t.type())) + t.shape().to_string());
    feed_eps.push_back(o.ep());
    key.push_back(encode(o.ep()));
  }
  key.push_back(-1);
  for (auto& o : fetches) {
    if (&o.owner() != &g)
      return invalid_argument("fetch '" + o.name() + "' belongs to another graph");
    fetch_eps.push_back(o.ep());
    key.push_back(encode(o.ep()));
  }
  key.push_back(-2);
  for (auto& t : targets) {
    if (&t.owner() != &g)
      return invalid_argument("target '" + t.name() + "' belongs to another graph");
    target_ids.push_back(t.node_id());
    key.push_back(t.node_id());
  }
  for (size_t i = 0; i < feed_eps.size(); ++i)
    for (size_t j = i + 1; j < feed_eps.size(); ++j)
      if (feed_eps[i] == feed_eps[j])
        return invalid_argument("'" + feeds[i].first.name() + "' is fed twice");

  std::shared_ptr<instance> inst;
  {
    std::lock_guard lock(mu);
    if (closed)
      return cancelled("the session is closed");
    auto it = instances.find(key);
    if (it != instances.end()) {
      inst = it->second;
    } else {
      RUNNEL_ASSIGN_OR_RETURN(inst, build(feed_eps, fetch_eps, target_ids));
      instances.emplace(key, inst);
    }
    std::lock_guard active_lock(active_mu);
    ++active;
  }

  reading.unlock(); // before waiting for a slot: finishing steps may need a writer's thread
  inst->in_flight->acquire();
  auto step = std::make_shared<step_state>();
  step->trace = std::move(trace);
  // Runtime-wide ids: Send/Recv of concurrent sessions share the rendezvous, keyed by step.
  step->id = step_id != 0 ? step_id : rt.next_step_id.fetch_add(1, std::memory_order_relaxed);
  step->remaining.store(inst->num_nodes, std::memory_order_relaxed);
  step->fetches.resize(fetches.size());
  step->actors = inst->actors;
  step->on_finish = [this, inst, extra = std::move(extra_finish)](step_state& s) {
    s.actors.reset();
    if (inst->uses_rendezvous)
      rt.rendezvous.end_step(s.id);
    if (extra)
      extra(s);
    inst->in_flight->release();
    std::lock_guard lock(active_mu);
    if (--active == 0)
      active_cv.notify_all();
  };
  for (size_t f = 0; f < fetches.size(); ++f)
    if (inst->fed_fetches[f] >= 0)
      step->fetches[f] = feeds[size_t(inst->fed_fetches[f])].second;
  if (inst->num_nodes == 0) {
    step->finish();
    return step;
  }
  if (inst->flow) {
    int64_t initial = int64_t(inst->sources.size());
    for (auto& cs : inst->feed_consumers)
      initial += int64_t(cs.size());
    step->flow = std::make_shared<flow_state>(inst->flow, *step, initial);
    auto root = step->flow->root_tag();
    for (size_t i = 0; i < feeds.size(); ++i)
      for (auto& c : inst->feed_consumers[i])
        caf::anon_send(c.actor, input_atom::value, step, c.slot, feeds[i].second, root);
    for (auto& a : inst->sources)
      caf::anon_send(a, start_atom::value, step);
    return step;
  }
  // A message to each Recv's actor would cost a scheduler hop (and a wake-up) each.
  for (auto& r : inst->local_recvs)
    fire(nullptr, *r, step, r->bound);
  for (size_t i = 0; i < feeds.size(); ++i)
    for (auto& c : inst->feed_consumers[i])
      caf::anon_send(c.actor, input_atom::value, step, c.slot, feeds[i].second);
  for (auto& a : inst->sources)
    caf::anon_send(a, start_atom::value, step);
  return step;
}

void session::impl::stop_instances() {
  for (auto& [key, inst] : instances)
    for (auto& a : inst->actors->nodes)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  instances.clear();
}

void session::fill_memory(run_metadata& md, const std::vector<output>& fetches) const {
  const graph& g = impl_->g;
  auto& nodes = md.nodes;
  // Each traced node's buffers live from its start until its last traced consumer ends.
  std::unordered_map<std::string_view, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i)
    index.emplace(nodes[i].node, i);
  int64_t step_end = 0;
  for (auto& n : nodes)
    step_end = std::max(step_end, n.end_ns);
  std::vector<int64_t> free_at(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    free_at[i] = nodes[i].end_ns;
  for (auto& [name, i] : index) {
    auto v = g.find(name);
    if (!v)
      continue; // a Recv: it hands its Send's buffer on
    for (auto& e : g.at(*v).inputs) {
      auto it = index.find(g.at(e.node).name);
      if (it != index.end())
        free_at[it->second] = std::max(free_at[it->second], nodes[i].end_ns);
    }
  }
  for (auto& f : fetches) {
    auto it = index.find(g.at(f.node_id()).name);
    if (it != index.end())
      free_at[it->second] = step_end;
  }
  md.peak_bytes_per_device.clear();
  md.memory_timeline.clear();
  for (auto& d : impl_->rt.devices) {
    // (time, +bytes) at starts and (time, -bytes) at frees; at equal times allocations first.
    std::vector<std::pair<int64_t, int64_t>> events;
    for (size_t i = 0; i < nodes.size(); ++i)
      // A Recv's output is its Send's buffer, counted on the producer's device until its last
      // consumer anywhere ends.
      if (nodes[i].device == d.name && nodes[i].output_bytes > 0 && nodes[i].op != "_Recv") {
        events.emplace_back(nodes[i].start_ns, nodes[i].output_bytes);
        events.emplace_back(free_at[i], -nodes[i].output_bytes);
      }
    std::sort(events.begin(), events.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    int64_t live = 0, peak = 0;
    std::vector<std::pair<int64_t, int64_t>> series;
    for (auto& [t, delta] : events) {
      live += delta;
      peak = std::max(peak, live);
      if (!series.empty() && series.back().first == t)
        series.back().second = live;
      else
        series.emplace_back(t, live);
    }
    md.peak_bytes_per_device.emplace_back(d.name, peak);
    md.memory_timeline.push_back(std::move(series));
  }
}

namespace {

std::mutex& hook_factories_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<session_hook_factory>& hook_factories() {
  static std::vector<session_hook_factory> factories;
  return factories;
}

} // namespace

bool register_session_hook(session_hook_factory factory) {
  std::lock_guard lock(hook_factories_mu());
  hook_factories().push_back(std::move(factory));
  return true;
}

session::session(runtime& rt, const graph& g, session_options options)
    : impl_(std::make_unique<impl>(rt.internals(), g, options)) {
  {
    std::lock_guard lock(hook_factories_mu());
    for (auto& make : hook_factories())
      if (auto h = make(g))
        hooks_.push_back(std::move(h));
  }
  std::lock_guard lock(impl_->registry->mu);
  impl_->registry->open.push_back(this);
}

status session::run_hooks(const std::vector<operation>& targets) {
  for (auto& h : hooks_)
    RUNNEL_RETURN_IF_ERROR(h->before_run(*this, targets));
  return {};
}

session::session(runtime& rt, const graph& g, const std::string& target,
                 session_options options)
    : session(rt, g, options) {
  if (!providers().remote_session)
    throw error(missing_provider("sessions on a cluster", "actors/cluster/remote_session.cpp"));
  remote_ = providers().remote_session(g, target, options);
}

session::~session() {
  close();
  // The runtime's destructor may be closing this session on its own thread: wait for it.
  // The registry outlives the runtime: a session destroyed after its runtime waits on nothing.
  auto& reg = *impl_->registry;
  std::unique_lock lock(reg.mu);
  reg.cv.wait(lock, [&] { return reg.closing != this; });
}

namespace {

/// A traced step's node times and their origin, into `md`.
void take_trace(trace_buffer& trace, run_metadata& md) {
  {
    std::lock_guard lock(trace.mu);
    md.nodes = trace.nodes;
  }
  md.origin_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(trace.origin.time_since_epoch()).count();
}

/// Lets options.cancellation fail `step` (it holds the step weakly: a finished step goes).
void bind_cancellation(const run_options& options, const step_ptr& step) {
  if (options.cancellation)
    options.cancellation->bind([w = std::weak_ptr<step_state>(step)](status why) {
      if (auto st = w.lock())
        st->fail(std::move(why));
    });
}

/// Waits for a local step, failing it when it passes options.timeout or options.interrupted
/// says so.
void wait_step(step_state& step, const run_options& options) {
  if (options.timeout.count() <= 0 && !options.interrupted) {
    step.wait();
    return;
  }
  auto start = std::chrono::steady_clock::now();
  auto deadline = options.timeout.count() > 0 ? start + options.timeout
                                              : std::chrono::steady_clock::time_point::max();
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      step.fail(deadline_exceeded("the step did not finish within " +
                                  std::to_string(options.timeout.count()) +
                                  " ms (run_options::timeout)"));
      break;
    }
    auto slice = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (options.interrupted)
      slice = std::min(slice, std::max(options.interrupt_poll, std::chrono::milliseconds(1)));
    if (step.wait_for(slice))
      break;
    if (options.interrupted && options.interrupted()) {
      step.fail(cancelled("the step was interrupted"));
      break;
    }
  }
  step.wait();
}

} // namespace

result<std::vector<tensor>> session::run(const feed_list& feeds, const std::vector<output>& fetches,
                                         const std::vector<operation>& targets) {
  return run(feeds, fetches, targets, run_options{}, nullptr);
}

result<std::vector<tensor>> session::run(const feed_list& feeds, const std::vector<output>& fetches,
                                         const std::vector<operation>& targets,
                                         const run_options& options, run_metadata* metadata) {
  RUNNEL_RETURN_IF_ERROR(run_hooks(targets));
  if (remote_) {
    if (options.trace && metadata)
      return remote_->run_traced(feeds, fetches, targets, *metadata);
    return remote_->run_waiting(feeds, fetches, targets, options);
  }
  std::shared_ptr<trace_buffer> trace;
  if (options.trace)
    trace = std::make_shared<trace_buffer>();
  RUNNEL_ASSIGN_OR_RETURN(step_ptr step, impl_->start(feeds, fetches, targets, nullptr, trace,
                                                      options.step_id));
  bind_cancellation(options, step);
  wait_step(*step, options);
  // GPU nodes complete when their kernels are enqueued (one GPU, stream-ordered): wait for the
  // GPUs, so a step's work has run when it returns and a kernel that failed running fails it.
  for (auto& d : impl_->rt.devices)
    if (d.gpu)
      if (status st = d.gpu->synchronize(); !st.ok())
        step->fail(st.with_context("a GPU kernel of this step failed while running (run with "
                                   "RUNNEL_GPU_SYNC_EACH_OP=1 to name its node)"));
  if (trace && metadata) {
    take_trace(*trace, *metadata);
    metadata->output_bytes_per_device.clear();
    for (auto& d : impl_->rt.devices) {
      int64_t bytes = 0;
      for (auto& n : metadata->nodes)
        if (n.device == d.name)
          bytes += n.output_bytes;
      metadata->output_bytes_per_device.emplace_back(d.name, bytes);
    }
    fill_memory(*metadata, fetches);
    if (impl_->options.costs) {
      std::lock_guard costs_lock(shared_costs_mu);
      learn_costs(*metadata, *impl_->options.costs);
    }
  }
  if (step->aborted.load(std::memory_order_acquire)) {
    std::lock_guard lock(step->error_mu);
    return step->error;
  }
  return std::move(step->fetches);
}

void learn_costs(const run_metadata& metadata, cost_model& costs) {
  for (auto& n : metadata.nodes) {
    auto spec = device_spec::parse(n.device);
    if (spec && spec->type)
      costs.record(n.node, *spec->type, double(n.end_ns - n.start_ns) / 1e9);
  }
}

std::string run_metadata::to_chrome_trace() const {
  // Devices become threads (tracks) of one process, in order of first appearance.
  std::vector<std::string> devices;
  auto track = [&](const std::string& d) {
    auto it = std::find(devices.begin(), devices.end(), d);
    if (it != devices.end())
      return int(it - devices.begin());
    devices.push_back(d);
    return int(devices.size() - 1);
  };
  auto quote = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\')
        out += '\\';
      if (static_cast<unsigned char>(c) < 0x20)
        continue;
      out += c;
    }
    return out + "\"";
  };
  std::string events;
  char buf[128];
  for (auto& n : nodes) {
    int tid = track(n.device);
    std::snprintf(buf, sizeof buf, ",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
                  tid, double(n.start_ns) / 1e3, double(n.end_ns - n.start_ns) / 1e3);
    events += (events.empty() ? "" : ",\n") + std::string("{\"name\":") + quote(n.node) +
              ",\"cat\":" + quote(n.op) + buf + ",\"args\":{\"op\":" + quote(n.op) +
              ",\"output_bytes\":" + std::to_string(n.output_bytes) +
              (n.cpu_ns < 0 ? std::string() : ",\"cpu_us\":" + std::to_string(n.cpu_ns / 1000)) +
              (n.frame.empty() ? std::string()
                               : ",\"frame\":" + quote(n.frame) +
                                     ",\"iteration\":" + std::to_string(n.iteration)) +
              "}}";
  }
  // Live output bytes per device as counter tracks.
  for (size_t d = 0; d < memory_timeline.size() && d < peak_bytes_per_device.size(); ++d)
    for (auto& [t, bytes] : memory_timeline[d]) {
      std::snprintf(buf, sizeof buf, ",\"ph\":\"C\",\"pid\":0,\"ts\":%.3f,\"args\":{\"bytes\":%lld}}",
                    double(t) / 1e3, static_cast<long long>(bytes));
      events += (events.empty() ? "" : ",\n") + std::string("{\"name\":") +
                quote("memory " + peak_bytes_per_device[d].first) + buf;
    }
  for (size_t i = 0; i < devices.size(); ++i)
    events += (events.empty() ? "" : ",\n") +
              std::string("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":") +
              std::to_string(i) + ",\"args\":{\"name\":" + quote(devices[i]) + "}}";
  // origin_ns places the step on the machine's steady clock, so that traces of several
  // processes on one machine line up (scripts/lib/sync_timeline.py merges them).
  return "{\"traceEvents\":[\n" + events +
         "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"origin_ns\":" + std::to_string(origin_ns) +
         "}}\n";
}

result<std::vector<tensor>> session::run(const named_feed_list& feeds,
                                         const std::vector<std::string>& fetches,
                                         const std::vector<std::string>& targets) {
  // The graph is const here; outputs need a mutable pointer only to hand out handles.
  auto& g = const_cast<graph&>(impl_->g);
  feed_list f;
  for (auto& [name, t] : feeds) {
    auto e = g.find_endpoint(name);
    if (!e)
      return e.error().with_context("feed '" + name + "'");
    f.emplace_back(output(&g, *e), t);
  }
  std::vector<output> outs;
  for (auto& name : fetches) {
    auto e = g.find_endpoint(name);
    if (!e)
      return e.error().with_context("fetch '" + name + "'");
    outs.emplace_back(&g, *e);
  }
  std::vector<operation> ops;
  for (auto& name : targets) {
    auto id = g.find(name);
    if (!id)
      return not_found("target '" + name + "': no node named '" + name + "' in the graph");
    ops.emplace_back(&g, *id);
  }
  return run(f, outs, ops);
}

void session::run_callback(const feed_list& feeds, const std::vector<output>& fetches,
                           const std::vector<operation>& targets,
                           std::function<void(result<std::vector<tensor>>)> done) {
  run_callback(feeds, fetches, targets, run_options{}, std::move(done));
}

void session::run_callback(const feed_list& feeds, const std::vector<output>& fetches,
                           const std::vector<operation>& targets, const run_options& options,
                           std::function<void(result<std::vector<tensor>>)> done) {
  run_callback_traced(feeds, fetches, targets, options,
                      [done = std::move(done)](result<std::vector<tensor>> r, run_metadata) {
                        done(std::move(r));
                      });
}

void session::run_callback_traced(
    const feed_list& feeds, const std::vector<output>& fetches,
    const std::vector<operation>& targets, const run_options& options,
    std::function<void(result<std::vector<tensor>>, run_metadata)> done) {
  if (status st = run_hooks(targets); !st.ok())
    return done(st, run_metadata{});
  if (remote_) {
    remote_->run(feeds, fetches, targets,
                        [done = std::move(done)](result<std::vector<tensor>> r) {
                          done(std::move(r), run_metadata{});
                        });
    return;
  }
  std::shared_ptr<trace_buffer> trace;
  if (options.trace)
    trace = std::make_shared<trace_buffer>();
  auto shared = std::make_shared<decltype(done)>(std::move(done));
  auto started = impl_->start(feeds, fetches, targets, [shared, trace](step_state& s) {
    run_metadata md;
    if (trace)
      take_trace(*trace, md);
    if (s.aborted.load(std::memory_order_acquire)) {
      status error;
      {
        std::lock_guard lock(s.error_mu);
        error = s.error;
      }
      (*shared)(std::move(error), std::move(md));
    } else {
      (*shared)(std::move(s.fetches), std::move(md));
    }
  }, trace, options.step_id);
  if (!started) {
    (*shared)(started.error(), run_metadata{});
    return;
  }
  bind_cancellation(options, *started);
}

void step_cancellation::cancel(status why) {
  std::function<void(status)> abort;
  {
    std::lock_guard lock(mu_);
    if (why_)
      return;
    why_ = why;
    abort = abort_;
  }
  if (abort)
    abort(std::move(why));
}

void step_cancellation::bind(std::function<void(status)> abort) {
  std::optional<status> why;
  {
    std::lock_guard lock(mu_);
    abort_ = abort;
    why = why_;
  }
  if (why)
    abort(std::move(*why));
}

std::future<result<std::vector<tensor>>> session::run_async(const feed_list& feeds,
                                                            const std::vector<output>& fetches,
                                                            const std::vector<operation>& targets) {
  auto promise = std::make_shared<std::promise<result<std::vector<tensor>>>>();
  auto future = promise->get_future();
  run_callback(feeds, fetches, targets,
               [promise](result<std::vector<tensor>> r) { promise->set_value(std::move(r)); });
  return future;
}

void session::close() {
  for (auto& h : hooks_) // a hook's loop may run steps of this session: end it first
    h->stop();
  if (remote_)
    remote_->close();
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->closed)
      return;
    impl_->closed = true;
  }
  {
    std::unique_lock lock(impl_->active_mu);
    impl_->active_cv.wait(lock, [&] { return impl_->active == 0; });
  }
  std::lock_guard lock(impl_->mu);
  impl_->stop_instances();
  auto& reg = *impl_->registry;
  std::lock_guard sessions_lock(reg.mu);
  reg.open.erase(std::remove(reg.open.begin(), reg.open.end(), this), reg.open.end());
  reg.cv.notify_all();
}

runtime::impl& session::runtime_internals() const {
  return impl_->rt;
}

bool session::closed() const {
  std::lock_guard lock(impl_->mu);
  return impl_->closed;
}

size_t session::num_instances() const {
  std::lock_guard lock(impl_->mu);
  return impl_->instances.size();
}

} // namespace runnel
