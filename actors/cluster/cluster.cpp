// Cluster nodes: the worker service (registered partitions run as local sessions with the
// master's step ids), the master service (placement over the cluster, partitioning per task,
// steps driven across tasks), and the node that ties them to a runtime and an endpoint.
#include "runnel/actors/cluster/cluster.hpp"

#include <ctime>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "runnel/actors/exec/internal.hpp"
#include "runnel/actors/cluster/master.hpp"
#include "runnel/actors/exec/node_metrics.hpp"
#include "runnel/net/endpoint.hpp"
#include "runnel/net/graph_def.hpp"
#include "runnel/net/metrics_server.hpp"

namespace runnel {

void log_line(const std::string& level, const std::string& message) {
  char ts[32];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string quoted;
  for (char c : message) {
    if (c == '"' || c == '\\')
      quoted += '\\';
    quoted += c == '\n' ? ' ' : c;
  }
  std::fprintf(stderr, "ts=%s level=%s msg=\"%s\"\n", ts, level.c_str(), quoted.c_str());
}

namespace {

// ---- the worker service ----------------------------------------------------------------------

class worker_impl : public net::worker_service {
public:
  /// Steps this worker ran (for metrics).
  struct step_counts {
    std::atomic<uint64_t> ok{0}, failed{0};
  };
  std::shared_ptr<step_counts> counts = std::make_shared<step_counts>();

  worker_impl(runtime& rt, task_id task, uint64_t incarnation, std::string cluster,
              std::function<void(const std::string&, const std::string&)> log)
      : rt_(rt), task_(std::move(task)), incarnation_(incarnation), cluster_(std::move(cluster)),
        log_(std::move(log)) {}

  ~worker_impl() override {
    std::lock_guard lock(mu_);
    parts_.clear();
  }

  net::worker_status status() override {
    net::worker_status s{task_, incarnation_, {}, cluster_};
    auto& params = rt_.cpu_params();
    for (auto& name : rt_.devices())
      s.devices.push_back({name, "CPU", params.memory_bytes, params.flops_per_s,
                           params.bytes_per_s});
    return s;
  }

  void register_graph(std::string bytes, net::callback<std::string> done) override {
    auto g = parse_graph(bytes, builtin_ops(), "partition from the master");
    if (!g) {
      done(g.error().with_context("task " + task_.name()));
      return;
    }
    auto part = std::make_shared<partition>();
    part->g = std::make_unique<graph>(std::move(g).value());
    std::string prefix = task_.name() + "/";
    std::vector<char> consumed(size_t(part->g->num_nodes()), 0);
    for (int v = 0; v < part->g->num_nodes(); ++v) {
      auto& n = part->g->at(v);
      if (n.device.compare(0, prefix.size(), prefix) != 0) {
        done(invalid_argument("node '" + n.name + "' of a partition sent to task " +
                              task_.name() + " is placed on '" + n.device + "'"));
        return;
      }
      for (auto& e : n.inputs)
        consumed[size_t(e.node)] = 1;
      for (int c : n.control_inputs)
        consumed[size_t(c)] = 1;
    }
    // Every node of a partition runs each step: target the sinks, the rest follows.
    for (int v = 0; v < part->g->num_nodes(); ++v)
      if (!consumed[size_t(v)])
        part->targets.emplace_back(part->g.get(), v);
    // Many steps may be in flight; the calling thread is the network's and must never wait.
    part->s = std::make_unique<session>(rt_, *part->g, session_options{.max_in_flight_steps = 4096});
    std::string handle;
    {
      std::lock_guard lock(mu_);
      handle = "partition-" + std::to_string(++next_);
      parts_.emplace(handle, part);
    }
    done(handle);
  }

  void run_graph(const std::string& handle, int64_t step_id, net::named_tensors feeds,
                 std::vector<std::string> fetches, net::callback<net::named_tensors> done) override {
    run_partition(handle, step_id, std::move(feeds), std::move(fetches), false,
                  net::without_trace<net::named_tensors>(std::move(done)));
  }

  void run_graph_traced(const std::string& handle, int64_t step_id, net::named_tensors feeds,
                        std::vector<std::string> fetches,
                        net::callback<net::traced<net::named_tensors>> done) override {
    run_partition(handle, step_id, std::move(feeds), std::move(fetches), true, std::move(done));
  }

  void run_partition(const std::string& handle, int64_t step_id, net::named_tensors feeds,
                     std::vector<std::string> fetches, bool trace,
                     net::callback<net::traced<net::named_tensors>> done) {
    std::shared_ptr<partition> part;
    {
      std::lock_guard lock(mu_);
      auto it = parts_.find(handle);
      if (it != parts_.end())
        part = it->second;
    }
    if (!part) {
      done(aborted("task " + task_.name() + " (incarnation " + std::to_string(incarnation_) +
                   ") has no partition '" + handle +
                   "': it restarted since the session registered it"));
      return;
    }
    graph& g = *part->g;
    feed_list f;
    for (auto& [name, t] : feeds) {
      auto e = g.find_endpoint(name);
      if (!e) {
        done(e.error().with_context("feed '" + name + "' on task " + task_.name()));
        return;
      }
      f.emplace_back(output(&g, *e), std::move(t));
    }
    std::vector<output> outs;
    for (auto& name : fetches) {
      auto e = g.find_endpoint(name);
      if (!e) {
        done(e.error().with_context("fetch '" + name + "' on task " + task_.name()));
        return;
      }
      outs.emplace_back(&g, *e);
    }
    // A fed node is not run (a fed placeholder that is only fetched is a sink).
    std::vector<operation> filtered;
    const std::vector<operation>* targets = &part->targets;
    for (auto& fed : f)
      for (auto& op : part->targets)
        if (int id = fed.first.node_id(); op.node_id() == id) {
          if (targets != &filtered) {
            filtered = part->targets;
            targets = &filtered;
          }
          std::erase_if(filtered, [id](const operation& x) { return x.node_id() == id; });
        }
    rt_.internals().rendezvous.begin_step(step_id);
    // cleanup_step aborts the step (a step waiting on a queue has no Recv to fail).
    auto cancellation = std::make_shared<step_cancellation>();
    {
      std::lock_guard lock(running_->mu);
      running_->steps.emplace(step_id, cancellation);
    }
    part->s->run_callback_traced(
        f, outs, *targets,
        run_options{.trace = trace, .step_id = step_id, .cancellation = cancellation},
        [part, fetches = std::move(fetches), done = std::move(done), task = task_, counts = counts,
         running = running_, step_id](result<std::vector<tensor>> r, run_metadata md) {
          {
            std::lock_guard lock(running->mu);
            running->steps.erase(step_id);
          }
          (r ? counts->ok : counts->failed)++;
          if (!r) {
            done(r.error());
            return;
          }
          net::traced<net::named_tensors> out;
          for (size_t i = 0; i < fetches.size(); ++i)
            out.value.emplace_back(fetches[i], std::move(r.value()[i]));
          for (auto& n : md.nodes) // on this process's steady clock
            out.trace.nodes.push_back({std::move(n.node), std::move(n.op), std::move(n.device),
                                       md.origin_ns + n.start_ns, md.origin_ns + n.end_ns,
                                       n.output_bytes});
          done(std::move(out));
        });
  }

  // The partition may not have reached its Recvs yet: they must fail when they come.
  void cleanup_step(int64_t step_id) override {
    rt_.internals().rendezvous.cancel_step(step_id);
    std::shared_ptr<step_cancellation> c;
    {
      std::lock_guard lock(running_->mu);
      if (auto it = running_->steps.find(step_id); it != running_->steps.end())
        c = it->second;
    }
    if (c)
      c->cancel(cancelled("step " + std::to_string(step_id) + " was cancelled on task " +
                          task_.name() + " by its master"));
  }

  void deregister_graph(const std::string& handle) override {
    std::shared_ptr<partition> part;
    {
      std::lock_guard lock(mu_);
      auto it = parts_.find(handle);
      if (it == parts_.end())
        return;
      part = std::move(it->second);
      parts_.erase(it);
    }
    // Closing waits for its steps: not on the network's thread.
    std::thread([part = std::move(part)]() mutable { part.reset(); }).detach();
  }

private:
  struct partition {
    std::unique_ptr<graph> g;
    std::unique_ptr<session> s;
    std::vector<operation> targets;
    ~partition() { s.reset(); } // the session before the graph it runs
  };
  runtime& rt_;
  task_id task_;
  uint64_t incarnation_;
  std::string cluster_;
  std::function<void(const std::string&, const std::string&)> log_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<partition>> parts_;
  uint64_t next_ = 0;
  /// The partitions' steps running now, by step id (shared with their completions).
  struct running_steps {
    std::mutex mu;
    std::map<int64_t, std::shared_ptr<step_cancellation>> steps;
  };
  std::shared_ptr<running_steps> running_ = std::make_shared<running_steps>();
};

} // namespace

// ---- the node ----------------------------------------------------------------------------------

struct cluster_node::impl {
  node_options options;
  uint64_t incarnation = 0;
  std::unique_ptr<runtime> rt;
  std::unique_ptr<worker_impl> worker;
  std::unique_ptr<master> master_service;
  std::unique_ptr<net::endpoint> ep;
  std::shared_ptr<net::remote_worker> local_worker;
  std::unique_ptr<net::metrics_server> metrics;
  std::shared_ptr<void> local_master; // declared last: stops first

  ~impl() {
    local_master.reset(); // no session of this process starts a call on the master now
    metrics.reset();
    if (rt)
      rt->internals().routes->set_remote(nullptr);
    ep.reset(); // no more calls or tensors arrive
    if (rt)
      rt->internals().rendezvous.cancel_all("task " + task_id{options.job, options.task}.name() +
                                            " is shutting down");
    master_service.reset();
    worker.reset();
    rt.reset();
  }
};

cluster_node::cluster_node(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
cluster_node::~cluster_node() = default;

result<std::unique_ptr<cluster_node>> cluster_node::start(node_options options) {
  auto i = std::make_unique<impl>();
  i->options = std::move(options);
  auto& o = i->options;
  if (!o.log)
    o.log = log_line;
  task_id self{o.job, o.task};
  auto address = o.cluster.address(o.job, o.task);
  if (!address)
    return address.error().with_context("starting task " + self.name());
  std::string listen = o.listen.empty() ? *address : o.listen;
  std::random_device rd;
  i->incarnation = (uint64_t(rd()) << 32 | rd()) | 1;
  i->rt = std::make_unique<runtime>(
      runtime_options{.cpu_devices = std::max(1, o.cpu_devices),
                      .job = o.job,
                      .task = o.task,
                      .simulated_gpus = o.simulated_gpus});
  i->worker = std::make_unique<worker_impl>(*i->rt, self, i->incarnation, o.cluster.to_string(),
                                            o.log);
  i->master_service = std::make_unique<master>(
      master_options{o.cluster, self, o.startup_timeout, o.log, o.heartbeat_timeout});
  net::endpoint_options eo;
  eo.listen = listen;
  eo.auth_token = o.auth_token;
  eo.allow_unauthenticated = o.allow_unauthenticated;
  eo.tls_cert = o.tls_cert;
  eo.tls_key = o.tls_key;
  eo.tls_ca = o.tls_ca;
  eo.idle_timeout = o.idle_timeout;
  eo.handshake_timeout = o.handshake_timeout;
  eo.worker = i->worker.get();
  eo.master = i->master_service.get();
  eo.incarnation = i->incarnation;
  for (auto& t : o.cluster.tasks())
    if (auto a = o.cluster.address(t))
      eo.task_names[*a] = t.name();
  if (o.traffic_classes) {
    // DSCP: calls EF (46), parameters AF41 (34), other tensors CS1 (8, lower effort).
    eo.rpc_tos = 46 << 2;
    eo.data_tos = o.job == "ps" ? 34 << 2 : 8 << 2;
  }
  auto* rt = i->rt.get();
  eo.on_tensor = [rt](int64_t step, std::string key, tensor value) {
    rt->internals().rendezvous.send_remote(step, key, std::move(value));
  };
  auto log = o.log;
  eo.log = [log](const std::string& line) { log("warn", line); };
  auto ep = net::endpoint::start(std::move(eo));
  if (!ep)
    return ep.error().with_context("task " + self.name());
  i->ep = std::move(ep).value();
  // The master reaches this task's worker directly, the others through the network.
  i->master_service->attach(i->ep.get(), i->worker.get());
  // Tensors for devices of other tasks go out on the data plane.
  auto* endpoint = i->ep.get();
  cluster_spec cluster = o.cluster;
  rt->internals().routes->set_remote(
      [endpoint, cluster](int64_t step, const std::string& key, const std::string& recv_device,
                          tensor value, bool wire_bf16, int64_t priority,
                          std::function<void(status)> done) {
        auto task = task_of_device(recv_device);
        if (!task) {
          done(task.error());
          return;
        }
        auto addr = cluster.address(*task);
        if (!addr) {
          done(addr.error().with_context("sending '" + key + "'"));
          return;
        }
        endpoint->send_tensor(*addr, step, key, std::move(value),
                              {.bf16 = wire_bf16, .priority = priority}, std::move(done));
      });
  if (!o.metrics.empty()) {
    auto* raw = i.get();
    auto m = net::metrics_server::start(o.metrics, [raw, self]() {
      return node_metrics_text(*raw->rt, *raw->ep, self.name(), raw->worker->counts->ok.load(),
                               raw->worker->counts->failed.load());
    });
    if (!m)
      return m.error().with_context("task " + self.name());
    i->metrics = std::move(m).value();
    o.log("info", "metrics on http://" + o.metrics + "/metrics (port " +
                      std::to_string(i->metrics->port()) + ")");
  }
  // Sessions in this process that name this node call its master directly.
  std::vector<std::string> addresses{*address};
  if (listen != *address)
    addresses.push_back(listen);
  if (auto split = cluster_spec::split_address(listen);
      split && (split->first == "0.0.0.0" || split->first == "127.0.0.1" ||
                split->first == "localhost" || split->first == "::" || split->first.empty()))
    for (const char* host : {"127.0.0.1:", "localhost:"})
      addresses.push_back(host + std::to_string(i->ep->port()));
  i->local_master = register_local_master(
      addresses, local_master_credentials(o.auth_token, !o.tls_cert.empty()), *i->master_service);
  std::string reach = i->ep->loopback_only()
                          ? "loopback only"
                          : (o.auth_token.empty() ? "reachable from other hosts, NO auth token "
                                                    "(--allow-unauthenticated)"
                                                  : "reachable from other hosts, auth token "
                                                    "required");
  reach += o.tls_cert.empty() ? ", plain TCP" : ", TLS with client certificates";
  o.log("info", "task " + self.name() + " serving on " + listen + " (port " +
                    std::to_string(i->ep->port()) + ", " + reach + "), incarnation " +
                    std::to_string(i->incarnation) + ", " + std::to_string(rt->devices().size()) +
                    " CPU device(s)");
  return std::unique_ptr<cluster_node>(new cluster_node(std::move(i)));
}

int cluster_node::metrics_port() const {
  return impl_->metrics ? impl_->metrics->port() : 0;
}

runtime& cluster_node::rt() {
  return *impl_->rt;
}
int cluster_node::port() const {
  return impl_->ep->port();
}
cluster_node::frame_counts cluster_node::frames_sent() const {
  auto& s = impl_->ep->stats();
  return {s.frames_sent.load(), s.frames_sent_shm.load(), s.frames_shm_full.load()};
}

uint64_t cluster_node::bytes_sent() const {
  return impl_->ep->stats().bytes_sent.load();
}
uint64_t cluster_node::bytes_received() const {
  return impl_->ep->stats().bytes_received.load();
}
uint64_t cluster_node::connections_accepted() const {
  return impl_->ep->stats().connections_accepted.load();
}
uint64_t cluster_node::incarnation() const {
  return impl_->incarnation;
}
const node_options& cluster_node::options() const {
  return impl_->options;
}

} // namespace runnel
