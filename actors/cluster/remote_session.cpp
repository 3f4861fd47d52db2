// Sessions on a cluster: the graph goes to a node's master, runs go by tensor and node names.
#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>

#include "runnel/actors/cluster/master.hpp"
#include "runnel/actors/exec/internal.hpp"
#include "runnel/net/endpoint.hpp"
#include "runnel/net/graph_def.hpp"

namespace runnel {

namespace {

struct cluster_session : session::remote {
  const graph& g;
  std::string target;
  session_options options;
  status broken; ///< a bad target: every run fails with it
  std::unique_ptr<net::endpoint> ep;
  /// The node's master (over the network or in this process), or this process's own
  /// (session_options::client_master): only its master_service calls are used.
  std::shared_ptr<net::master_service> master;
  std::mutex mu;
  std::string handle;
  int sent_nodes = 0;
  bool closed = false;

  cluster_session(const graph& graph, std::string t, session_options o)
      : g(graph), target(std::move(t)), options(std::move(o)) {}
  ~cluster_session() override {
    master.reset();
    ep.reset();
  }

  /// Waits for a reply within `remote_timeout` (when set); the late reply is dropped.
  template <class F> status wait_for_reply(F& f, const std::string& what) {
    if (options.remote_timeout.count() > 0 &&
        f.wait_for(options.remote_timeout) != std::future_status::ready)
      return deadline_exceeded(what + " on " + target + " took longer than " +
                               std::to_string(options.remote_timeout.count()) +
                               " ms (session_options::remote_timeout)");
    return {};
  }

  /// session_options::client_master: a master of this process's own, for the cluster the target
  /// node was started with (asked for on the first run, again after a failure).
  status start_client_master() {
    std::string address = target.substr(std::string("runnel://").size());
    auto p = std::make_shared<std::promise<result<net::worker_status>>>();
    auto f = p->get_future();
    ep->worker(address)->status([p](result<net::worker_status> r) { p->set_value(std::move(r)); });
    RUNNEL_RETURN_IF_ERROR(wait_for_reply(f, "asking for the cluster spec"));
    auto st = f.get();
    if (!st)
      return st.error().with_context("asking " + target + " for its cluster spec");
    auto spec = cluster_spec::parse(st->cluster);
    if (!spec)
      return spec.error().with_context("the cluster spec " + target + " reports");
    // It places and partitions the graphs and calls each task's worker through this endpoint,
    // so a step costs one runGraph round trip per task.
    auto own = std::make_shared<runnel::master>(master_options{.cluster = std::move(spec).value()});
    own->attach(ep.get(), nullptr);
    master = std::move(own);
    return {};
  }

  /// Creates the master's session, or extends it with nodes added since (blocks).
  status sync_graph() {
    std::lock_guard lock(mu);
    if (closed)
      return cancelled("the session is closed");
    if (!broken.ok())
      return broken;
    if (!master)
      RUNNEL_RETURN_IF_ERROR(start_client_master());
    if (!handle.empty() && g.num_nodes() == sent_nodes)
      return {};
    int nodes = g.num_nodes();
    std::string bytes = serialize_graph(g);
    if (handle.empty()) {
      auto p = std::make_shared<std::promise<result<std::string>>>();
      auto f = p->get_future();
      master->create_session(std::move(bytes),
                             options.placement == session_options::placement_policy::cost_model,
                             [p](result<std::string> r) { p->set_value(std::move(r)); });
      RUNNEL_RETURN_IF_ERROR(wait_for_reply(f, "creating the session"));
      auto r = f.get();
      if (!r)
        return r.error().with_context("session on " + target);
      handle = *r;
    } else {
      auto p = std::make_shared<std::promise<status>>();
      auto f = p->get_future();
      master->extend_session(handle, std::move(bytes), [p](status s) { p->set_value(s); });
      RUNNEL_RETURN_IF_ERROR(wait_for_reply(f, "extending the session"));
      auto s = f.get();
      if (!s.ok())
        return s.with_context("extending the session on " + target);
    }
    sent_nodes = nodes;
    return {};
  }

  void run(const feed_list& feeds, const std::vector<output>& fetches,
           const std::vector<operation>& targets,
           std::function<void(result<std::vector<tensor>>)> done) override {
    run_step(feeds, fetches, targets, false, net::without_trace<std::vector<tensor>>(std::move(done)));
  }

  result<std::vector<tensor>> run_waiting(const feed_list& feeds,
                                          const std::vector<output>& fetches,
                                          const std::vector<operation>& targets,
                                          const run_options& ro) override;
  result<std::vector<tensor>> run_traced(const feed_list& feeds,
                                         const std::vector<output>& fetches,
                                         const std::vector<operation>& targets,
                                         run_metadata& metadata) override;
  void close() override;
  /// Asks the master to fail the session's steps in flight, and waits (briefly) until it has.
  void cancel_on_master();
  /// Runs of this session waiting in run_waiting now.
  std::atomic<int> waiting_runs{0};

  /// With `trace`, the reply carries every task's nodes on the master's clock, which the caller
  /// aligns to this process's (run_remote_traced).
  void run_step(const feed_list& feeds, const std::vector<output>& fetches,
                const std::vector<operation>& targets, bool trace,
                net::callback<net::traced<std::vector<tensor>>> done) {
    status s = sync_graph();
    if (!s.ok()) {
      done(s);
      return;
    }
    net::named_tensors named;
    for (auto& [o, t] : feeds) {
      if (&o.owner() != &g) {
        done(invalid_argument("feed '" + o.name() + "' belongs to another graph"));
        return;
      }
      named.emplace_back(o.name(), t);
    }
    std::vector<std::string> fetch_names, target_names;
    for (auto& o : fetches)
      fetch_names.push_back(o.name());
    for (auto& op : targets)
      target_names.push_back(op.name());
    std::string h;
    {
      std::lock_guard lock(mu);
      h = handle;
    }
    if (!trace) {
      master->run(h, std::move(named), std::move(fetch_names), std::move(target_names),
                  net::with_empty_trace<std::vector<tensor>>(std::move(done)));
      return;
    }
    int64_t sent = net::steady_ns();
    master->run_traced(h, std::move(named), std::move(fetch_names), std::move(target_names),
                       [done = std::move(done), sent](result<net::traced<std::vector<tensor>>> r) {
                         if (r) {
                           int64_t got = net::steady_ns();
                           std::vector<net::traced_node> nodes{
                               {"run", "_Run", "client: run calls", sent, got, 0}};
                           net::align_trace(r->trace, sent, got, nodes);
                           r->trace.nodes = std::move(nodes);
                           r->trace.received_ns = sent; // what the nodes count from
                         }
                         done(std::move(r));
                       });
  }
};

} // namespace

static std::shared_ptr<session::remote> make_remote_session(const graph& g, const std::string& target,
                                                     const session_options& options) {
  auto r = std::make_shared<cluster_session>(g, target, options);
  const std::string scheme = "runnel://";
  if (target.compare(0, scheme.size(), scheme) != 0) {
    r->broken = invalid_argument("session target '" + target +
                                 "' is not runnel://host:port");
    return r;
  }
  std::string address = target.substr(scheme.size());
  if (auto split = cluster_spec::split_address(address); !split) {
    r->broken = split.error().with_context("session target '" + target + "'");
    return r;
  }
  // A node of this process serves the target: its master is called directly.
  if (auto local = options.in_process_master
                       ? find_local_master(address, local_master_credentials(
                                                        options.auth_token, !options.tls_cert.empty()))
                       : nullptr) {
    r->master = std::move(local);
    return r;
  }
  net::endpoint_options eo;
  eo.auth_token = options.auth_token;
  eo.tls_cert = options.tls_cert;
  eo.tls_key = options.tls_key;
  eo.tls_ca = options.tls_ca;
  auto ep = net::endpoint::start(std::move(eo));
  if (!ep) {
    r->broken = ep.error();
    return r;
  }
  r->ep = std::move(ep).value();
  if (!options.client_master) // else made on the first run (cluster_session::start_client_master)
    r->master = r->ep->master(address);
  return r;
}

result<std::vector<tensor>> cluster_session::run_waiting(const feed_list& feeds,
                                                         const std::vector<output>& fetches,
                                                         const std::vector<operation>& targets,
                                                         const run_options& ro) {
  auto& r = *this;
  auto p = std::make_shared<std::promise<result<std::vector<tensor>>>>();
  auto f = p->get_future();
  r.waiting_runs.fetch_add(1);
  struct leave {
    std::atomic<int>& n;
    ~leave() { n.fetch_sub(1); }
  } left{r.waiting_runs};
  r.run(feeds, fetches, targets, [p](result<std::vector<tensor>> v) { p->set_value(std::move(v)); });
  using clock = std::chrono::steady_clock;
  bool bounded = r.options.remote_timeout.count() > 0, timed = ro.timeout.count() > 0;
  if (!bounded && !timed && !ro.interrupted)
    return f.get();
  // A day stands for no deadline (wait_for's arithmetic overflows with the clock's maximum).
  auto start = clock::now();
  auto no_deadline = start + clock::duration(std::chrono::hours(24));
  auto remote_deadline = bounded ? start + r.options.remote_timeout : no_deadline;
  auto step_deadline = timed ? start + ro.timeout : no_deadline;
  for (;;) {
    auto now = clock::now();
    if (now >= remote_deadline && bounded)
      return deadline_exceeded("the cluster at " + r.target + " did not finish the step within " +
                               std::to_string(r.options.remote_timeout.count()) + " ms");
    if (now >= step_deadline && timed) {
      std::string what = "the step did not finish within " + std::to_string(ro.timeout.count()) +
                         " ms (run_options::timeout)";
      // Cancelling is session-wide: only done when no other run of this session waits.
      if (r.waiting_runs.load() == 1) {
        r.cancel_on_master();
        return deadline_exceeded(what + "; the cluster at " + r.target + " was asked to cancel it");
      }
      return deadline_exceeded(what +
                               "; other steps of this session were in flight, so it was "
                               "left to finish on the cluster at " +
                               r.target);
    }
    clock::duration slice = std::min(remote_deadline, step_deadline) - now;
    if (ro.interrupted)
      slice = std::min<clock::duration>(slice,
                                        std::max(ro.interrupt_poll, std::chrono::milliseconds(1)));
    if (f.wait_for(slice) == std::future_status::ready)
      return f.get();
    if (ro.interrupted && ro.interrupted()) {
      r.cancel_on_master();
      return cancelled("the step was interrupted; the cluster at " + r.target +
                       " was asked to cancel the session's steps in flight");
    }
  }
}

void cluster_session::cancel_on_master() {
  std::string h;
  {
    std::lock_guard lock(mu);
    h = handle;
  }
  if (h.empty() || !master)
    return;
  // Waited for (briefly), so that the caller's next step is not among those cancelled.
  auto cancelled_all = std::make_shared<std::promise<void>>();
  auto f = cancelled_all->get_future();
  master->cancel_steps(h, [cancelled_all](status) { cancelled_all->set_value(); });
  f.wait_for(std::chrono::seconds(10));
}

result<std::vector<tensor>> cluster_session::run_traced(const feed_list& feeds,
                                                        const std::vector<output>& fetches,
                                                        const std::vector<operation>& targets,
                                                        run_metadata& metadata) {
  auto& r = *this;
  auto p = std::make_shared<std::promise<result<net::traced<std::vector<tensor>>>>>();
  auto f = p->get_future();
  r.run_step(feeds, fetches, targets, true,
             [p](result<net::traced<std::vector<tensor>>> v) { p->set_value(std::move(v)); });
  if (r.options.remote_timeout.count() > 0 &&
      f.wait_for(r.options.remote_timeout) != std::future_status::ready)
    return deadline_exceeded("the cluster at " + r.target + " did not finish the step within " +
                             std::to_string(r.options.remote_timeout.count()) + " ms");
  auto v = f.get();
  if (!v)
    return v.error();
  // Times from the run's send on this process's clock; bytes per device from the nodes.
  metadata = run_metadata{};
  metadata.origin_ns = v->trace.received_ns;
  for (auto& n : v->trace.nodes) {
    node_trace t{n.node, n.op, n.device, n.start_ns - metadata.origin_ns,
                 n.end_ns - metadata.origin_ns, n.output_bytes};
    auto it = std::find_if(metadata.output_bytes_per_device.begin(),
                           metadata.output_bytes_per_device.end(),
                           [&](auto& d) { return d.first == n.device; });
    if (it == metadata.output_bytes_per_device.end())
      metadata.output_bytes_per_device.emplace_back(n.device, n.output_bytes);
    else
      it->second += n.output_bytes;
    metadata.nodes.push_back(std::move(t));
  }
  return std::move(v->value);
}

void cluster_session::close() {
  auto& r = *this;
  std::string h;
  {
    std::lock_guard lock(r.mu);
    if (r.closed)
      return;
    r.closed = true;
    h = r.handle;
  }
  if (!h.empty() && r.master)
    r.master->close_session(h);
}

// Registered with the executor (actors/exec/providers.hpp); the symbol below is what
// actors/CMakeLists.txt makes every program link.
extern "C" const int runnel_remote_session_linked = 1;
namespace {
[[maybe_unused]] const bool registered = (providers().remote_session = make_remote_session, true);
} // namespace

} // namespace runnel
