#include "runnel/actors/master.hpp"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "runnel/actors/heartbeat.hpp"
#include "runnel/actors/internal.hpp"
#include "runnel/net/graph_def.hpp"
#include "runnel/placement/cost_model.hpp"
#include "runnel/placement/partition.hpp"
#include "runnel/placement/placer.hpp"

namespace runnel {
namespace {

/// This task's own worker, called directly (no connection to itself).
class local_worker_handle : public net::remote_worker {
public:
  local_worker_handle(net::worker_service& w, std::string address)
      : w_(w), address_(std::move(address)) {}
  const std::string& address() const override { return address_; }
  void status(net::callback<net::worker_status> done) override { done(w_.status()); }
  void register_graph(std::string bytes, net::callback<std::string> done) override {
    w_.register_graph(std::move(bytes), std::move(done));
  }
  void run_graph(const std::string& handle, int64_t step_id, net::named_tensors feeds,
                 std::vector<std::string> fetches, net::callback<net::named_tensors> done) override {
    w_.run_graph(handle, step_id, std::move(feeds), std::move(fetches), std::move(done));
  }
  void cleanup_step(int64_t step_id) override { w_.cleanup_step(step_id); }
  void deregister_graph(const std::string& handle) override { w_.deregister_graph(handle); }

private:
  net::worker_service& w_;
  std::string address_;
};

template <class T> result<T> wait_for(std::future<result<T>>& f, std::chrono::milliseconds limit,
                                      const std::string& what) {
  if (f.wait_for(limit) != std::future_status::ready)
    return deadline_exceeded(what + " did not answer within " +
                             std::to_string(limit.count()) + " ms");
  return f.get();
}

/// A partition registered with one task's worker, and what a step sends it and gets back.
struct task_part {
  task_id task;
  std::shared_ptr<net::remote_worker> worker;
  std::string handle;
  std::vector<size_t> feed_index;        ///< into the run's feeds
  std::vector<std::string> feed_names;   ///< as the partition names them
  std::vector<size_t> fetch_index;       ///< into the run's fetches
  std::vector<std::string> fetch_names;
};

struct registration {
  std::vector<task_part> parts;
};

struct master_session {
  /// Guards `registered` only, briefly: the RPC event loop thread takes it, so it must never be
  /// held while waiting on the network.
  std::mutex mu;
  /// Held while the graph, its placement or the workers change (extend, build): a build waits on
  /// the tasks, so only helper threads take it, never the event loop (a run on the loop that
  /// waited for a build holding it would stop the very replies the build waits for).
  std::mutex build_mu;
  std::string handle;
  std::unique_ptr<graph> g;
  bool cost_model = false;
  std::vector<std::string> devices;           ///< the cluster's devices, in priority order
  std::vector<device_params> params;          ///< per device
  std::map<task_id, std::shared_ptr<net::remote_worker>> workers;
  std::vector<std::string> device_of_node;    ///< placement of g's nodes
  std::map<std::string, std::shared_ptr<registration>> registered; ///< by signature
};

} // namespace

struct master::impl : std::enable_shared_from_this<master::impl> {
  master_options options;
  std::mutex mu;
  net::endpoint* ep = nullptr;
  net::worker_service* local_worker = nullptr;
  bool stopped = false;
  int threads = 0; // helper threads running (builds, discovery)
  std::condition_variable threads_cv;
  std::map<std::string, std::shared_ptr<master_session>> sessions;
  uint64_t next_session = 0;
  std::mt19937_64 rng{std::random_device{}()};
  /// Pings the tasks of long steps (null: heartbeats off).
  std::unique_ptr<heartbeat_monitor> heartbeats;

  void log(const std::string& level, const std::string& msg) {
    if (options.log)
      options.log(level, msg);
  }

  /// The worker of `t`: this task's directly, others through the endpoint (null once stopped).
  std::shared_ptr<net::remote_worker> worker_for(const task_id& t) {
    std::lock_guard lock(mu);
    if (stopped)
      return nullptr;
    auto address = options.cluster.address(t);
    if (!address)
      return nullptr;
    if (options.self && *options.self == t && local_worker)
      return std::make_shared<local_worker_handle>(*local_worker, *address);
    if (!ep)
      return nullptr;
    return ep->worker(*address);
  }

  /// Runs `fn` on a helper thread that the master waits for when it stops.
  void spawn(std::function<void()> fn) {
    {
      std::lock_guard lock(mu);
      ++threads;
    }
    std::thread([self = shared_from_this(), fn = std::move(fn)] {
      fn();
      std::lock_guard lock(self->mu);
      if (--self->threads == 0)
        self->threads_cv.notify_all();
    }).detach();
  }

  int64_t new_step_id() {
    std::lock_guard lock(mu);
    int64_t id;
    do
      id = int64_t(rng() >> 1);
    while (id == 0);
    return id;
  }

  /// Asks every task for its devices, retrying until the start-up timeout; the error names the
  /// tasks that never answered.
  status discover(master_session& s) {
    auto tasks = options.cluster.tasks();
    // This task's devices first: unconstrained nodes go there.
    if (options.self)
      std::stable_partition(tasks.begin(), tasks.end(),
                            [&](const task_id& t) { return t == *options.self; });
    auto deadline = std::chrono::steady_clock::now() + options.startup_timeout;
    std::map<task_id, net::worker_status> found;
    std::map<task_id, std::string> last_error;
    for (;;) {
      std::vector<std::pair<task_id, std::future<result<net::worker_status>>>> pending;
      for (auto& t : tasks) {
        if (found.count(t))
          continue;
        auto w = worker_for(t);
        if (!w)
          return cancelled("the master is shutting down");
        auto p = std::make_shared<std::promise<result<net::worker_status>>>();
        pending.emplace_back(t, p->get_future());
        w->status([p](result<net::worker_status> r) { p->set_value(std::move(r)); });
        s.workers[t] = w;
      }
      for (auto& [t, f] : pending) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        auto r = wait_for(f, std::max(left, std::chrono::milliseconds(100)),
                          "task " + t.name());
        if (r && (r->task != t)) {
          last_error[t] = "the node at " + options.cluster.address(t).value() + " is " +
                          r->task.name();
          continue;
        }
        if (r)
          found.emplace(t, std::move(r).value());
        else
          last_error[t] = r.error().message();
      }
      if (found.size() == tasks.size())
        break;
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string missing;
        for (auto& t : tasks)
          if (!found.count(t))
            missing += (missing.empty() ? "" : "; ") + t.name() + " at " +
                       options.cluster.address(t).value() + " (" + last_error[t] + ")";
        return unavailable("tasks did not answer within " +
                           std::to_string(options.startup_timeout.count()) + " ms: " + missing);
      }
      {
        std::lock_guard lock(mu);
        if (stopped)
          return cancelled("the master is shutting down");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (auto& t : tasks)
      for (auto& d : found[t].devices) {
        s.devices.push_back(d.name);
        device_params p;
        if (d.flops_per_s > 0)
          p.flops_per_s = d.flops_per_s;
        if (d.bytes_per_s > 0)
          p.bytes_per_s = d.bytes_per_s;
        p.memory_bytes = d.memory_bytes;
        s.params.push_back(p);
      }
    return {};
  }

  /// Places the nodes of s.g that have no device yet (all, the first time); earlier ones keep
  /// theirs, and new members of their colocation groups follow them.
  status place(master_session& s) {
    const graph& g = *s.g;
    auto all = all_nodes(g);
    auto devices = placement_devices_from(s.devices);
    auto& kernels = runtime_kernels();
    auto has_kernel = [&](const node& n, const std::string& type) {
      return kernels.has_kernel(n, type == "GPU" ? device_type::gpu : device_type::cpu);
    };
    std::vector<size_t> where;
    if (s.cost_model) {
      cost_model costs;
      RUNNEL_ASSIGN_OR_RETURN(auto p, place_greedy(g, all, devices, s.params, costs, has_kernel));
      where = std::move(p.device);
    } else {
      RUNNEL_ASSIGN_OR_RETURN(where, place_simple(g, all, devices, has_kernel));
    }
    std::vector<std::string> names(where.size());
    for (size_t v = 0; v < where.size(); ++v)
      names[v] = s.devices[where[v]];
    size_t old = s.device_of_node.size();
    if (old > 0) {
      auto groups = colocation_groups(g, all);
      std::map<int, std::string> kept;
      for (size_t v = 0; v < old; ++v) {
        names[v] = s.device_of_node[v];
        kept.emplace(groups[v], names[v]);
      }
      for (size_t v = old; v < names.size(); ++v)
        if (auto it = kept.find(groups[v]); it != kept.end())
          names[v] = it->second;
    }
    s.device_of_node = std::move(names);
    return {};
  }

  /// Prunes, partitions per task and registers one signature.
  result<std::shared_ptr<registration>> build(master_session& s, const net::named_tensors& feeds,
                                              const std::vector<std::string>& fetches,
                                              const std::vector<std::string>& targets) {
    const graph& base = *s.g;
    // Fed tensors that are not a Placeholder's output become Placeholders of their own, so the
    // nodes behind them are pruned and their tasks need not run them.
    std::vector<std::string> feed_names;
    std::unique_ptr<graph> rewritten;
    std::map<std::string, std::string> device_of; // by node name
    for (size_t v = 0; v < s.device_of_node.size(); ++v)
      device_of[base.at(int(v)).name] = s.device_of_node[v];
    graph_def def;
    bool rewrite = false;
    for (auto& [name, t] : feeds) {
      auto e = base.find_endpoint(name);
      if (!e)
        return e.error().with_context("feed '" + name + "'");
      const node& n = base.at(e->node);
      if ((n.op == "Placeholder" && e->index == 0)) {
        feed_names.push_back(n.name + ":0");
        continue;
      }
      if (!rewrite) {
        def = to_graph_def(base);
        rewrite = true;
      }
      std::string tensor_name = n.name + ":" + std::to_string(e->index);
      std::string ph = "_feed/" + n.name + "_" + std::to_string(e->index);
      for (auto& nd : def.nodes)
        for (auto& in : nd.inputs)
          if (in == tensor_name || (e->index == 0 && in == n.name))
            in = ph;
      def.nodes.insert(def.nodes.begin(),
                       node_def{ph, "Placeholder", {}, device_of[n.name],
                                {{"dtype", n.output_types[size_t(e->index)]},
                                 {"shape", n.output_shapes[size_t(e->index)]}}});
      device_of[ph] = device_of[n.name];
      feed_names.push_back(ph + ":0");
    }
    if (rewrite) {
      auto g2 = from_graph_def(def, base.ops());
      if (!g2)
        return g2.error().with_context("rewriting fed tensors as placeholders");
      rewritten = std::make_unique<graph>(std::move(g2).value());
    }
    const graph& g = rewritten ? *rewritten : base;

    // Prune: what the fetches and targets need.
    std::vector<char> needed(size_t(g.num_nodes()), 0);
    std::vector<int> stack;
    std::vector<std::string> fetch_names;
    for (auto& f : fetches) {
      auto e = base.find_endpoint(f);
      if (!e)
        return e.error().with_context("fetch '" + f + "'");
      std::string name = base.at(e->node).name + ":" + std::to_string(e->index);
      // A fetch of a fed tensor reads the placeholder that replaced it.
      for (size_t i = 0; i < feeds.size(); ++i) {
        auto fe = base.find_endpoint(feeds[i].first);
        if (fe && fe->node == e->node && fe->index == e->index)
          name = feed_names[i];
      }
      auto ge = g.find_endpoint(name);
      if (!ge)
        return ge.error().with_context("fetch '" + f + "'");
      fetch_names.push_back(name);
      stack.push_back(ge->node);
    }
    for (auto& t : targets) {
      auto id = g.find(t);
      if (!id)
        return not_found("target '" + t + "': no node named '" + t + "' in the graph");
      stack.push_back(*id);
    }
    for (auto& f : feed_names)
      stack.push_back(g.find_endpoint(f).value().node);
    while (!stack.empty()) {
      int v = stack.back();
      stack.pop_back();
      if (needed[size_t(v)])
        continue;
      needed[size_t(v)] = 1;
      for (auto& e : g.at(v).inputs)
        stack.push_back(e.node);
      for (int c : g.at(v).control_inputs)
        stack.push_back(c);
    }
    std::vector<int> nodes;
    std::vector<std::string> devices;
    for (int v = 0; v < g.num_nodes(); ++v)
      if (needed[size_t(v)]) {
        nodes.push_back(v);
        auto it = device_of.find(g.at(v).name);
        if (it == device_of.end())
          return internal_error("node '" + g.at(v).name + "' was never placed");
        devices.push_back(it->second);
      }
    RUNNEL_ASSIGN_OR_RETURN(auto parts, partition(g, nodes, devices));

    // One graph per task.
    std::map<task_id, graph_def> per_task;
    for (auto& p : parts) {
      RUNNEL_ASSIGN_OR_RETURN(auto t, task_of_device(p.device));
      auto& d = per_task[t];
      for (auto& n : p.nodes)
        d.nodes.push_back(std::move(n));
      d.seed = g.seed();
    }
    auto reg = std::make_shared<registration>();
    std::vector<std::pair<size_t, std::future<result<std::string>>>> pending;
    for (auto& [t, d] : per_task) {
      task_part part;
      part.task = t;
      part.worker = s.workers[t];
      if (!part.worker)
        return unavailable("no connection to task " + t.name());
      std::set<std::string> here;
      for (auto& n : d.nodes)
        here.insert(n.name);
      for (size_t i = 0; i < feed_names.size(); ++i)
        if (here.count(feed_names[i].substr(0, feed_names[i].rfind(':')))) {
          part.feed_index.push_back(i);
          part.feed_names.push_back(feed_names[i]);
        }
      for (size_t i = 0; i < fetch_names.size(); ++i)
        if (here.count(fetch_names[i].substr(0, fetch_names[i].rfind(':')))) {
          part.fetch_index.push_back(i);
          part.fetch_names.push_back(fetch_names[i]);
        }
      auto p = std::make_shared<std::promise<result<std::string>>>();
      pending.emplace_back(reg->parts.size(), p->get_future());
      part.worker->register_graph(serialize_graph_def(d), [p](result<std::string> r) {
        p->set_value(std::move(r));
      });
      reg->parts.push_back(std::move(part));
    }
    status failed;
    for (auto& [i, f] : pending) {
      auto r = wait_for(f, std::chrono::milliseconds(60000),
                        "registering a partition with task " + reg->parts[i].task.name());
      if (r)
        reg->parts[i].handle = *r;
      else if (failed.ok())
        failed = r.error().with_context("registering the partition of task " +
                                        reg->parts[i].task.name());
    }
    if (!failed.ok()) {
      for (auto& p : reg->parts)
        if (!p.handle.empty())
          p.worker->deregister_graph(p.handle);
      return failed;
    }
    return reg;
  }

  /// Runs one step of a registered signature; `done` gets the fetches or the first error.
  void start_step(std::shared_ptr<master_session> s, std::shared_ptr<registration> reg,
                  net::named_tensors feeds, size_t num_fetches,
                  net::callback<std::vector<tensor>> done) {
    struct step {
      std::mutex mu;
      size_t remaining = 0;
      status first;
      bool cleaned = false;
      bool reported = false; ///< `done` ran (or a heartbeat failed the step first)
      std::vector<tensor> fetches;
      net::callback<std::vector<tensor>> done;
      std::shared_ptr<heartbeat_monitor::watch> heartbeat;
    };
    auto st = std::make_shared<step>();
    st->remaining = reg->parts.size();
    st->fetches.resize(num_fetches);
    st->done = std::move(done);
    if (reg->parts.empty()) {
      st->done(std::move(st->fetches));
      return;
    }
    int64_t id = new_step_id();
    auto self = shared_from_this();
    if (heartbeats) {
      heartbeat_monitor::task_list tasks;
      for (auto& part : reg->parts)
        tasks.emplace_back(part.task.name(), part.worker);
      // A task that stops answering fails the step now; its run_graph answer, if it ever comes,
      // is ignored.
      st->heartbeat = heartbeats->start(
          std::move(tasks), [self, w = std::weak_ptr<step>(st), reg, id](status why) {
            auto st = w.lock();
            if (!st)
              return;
            net::callback<std::vector<tensor>> done;
            {
              std::lock_guard lock(st->mu);
              if (st->reported)
                return;
              st->reported = st->cleaned = true;
              done = std::move(st->done);
            }
            for (auto& part : reg->parts)
              part.worker->cleanup_step(id);
            self->log("warn", "step failed: " + why.message());
            done(std::move(why));
          });
    }
    for (size_t p = 0; p < reg->parts.size(); ++p) {
      auto& part = reg->parts[p];
      net::named_tensors part_feeds;
      for (size_t i = 0; i < part.feed_index.size(); ++i)
        part_feeds.emplace_back(part.feed_names[i], feeds[part.feed_index[i]].second);
      part.worker->run_graph(
          part.handle, id, std::move(part_feeds), part.fetch_names,
          [self, s, reg, st, p, id](result<net::named_tensors> r) {
            auto& part = reg->parts[p];
            bool cleanup = false, finished = false;
            {
              std::lock_guard lock(st->mu);
              if (!r) {
                if (st->first.ok())
                  st->first = r.error().with_context("task " + part.task.name());
                if (!st->cleaned) {
                  st->cleaned = true;
                  cleanup = true;
                }
              } else {
                for (size_t i = 0; i < part.fetch_index.size() && i < r->size(); ++i)
                  st->fetches[part.fetch_index[i]] = std::move((*r)[i].second);
              }
              finished = --st->remaining == 0 && !st->reported;
              if (finished) {
                st->reported = true;
                st->heartbeat.reset();
              }
            }
            if (cleanup) {
              // Other tasks may wait for tensors the failed one will never send.
              for (auto& other : reg->parts)
                other.worker->cleanup_step(id);
              auto code = r.error().code();
              // A kernel's own UNAVAILABLE (e.g. a sync take naming missing workers) says
              // nothing about the connection to the task that ran it: keep that one.
              bool from_kernel = r.error().message().find("node '") != std::string::npos &&
                                 r.error().message().find("(op ") != std::string::npos;
              if ((code == error_code::unavailable && !from_kernel) ||
                  code == error_code::aborted) {
                // A task went away or restarted: fresh connections and registrations next run.
                {
                  std::lock_guard lock(self->mu);
                  if (self->ep)
                    if (auto a = self->options.cluster.address(part.task))
                      self->ep->forget_peer(*a);
                }
                std::lock_guard lock(s->mu);
                s->registered.clear();
                self->log("warn", "step failed: " + r.error().message() +
                                      "; partitions will be registered again");
              }
            }
            if (finished) {
              if (!st->first.ok())
                st->done(st->first);
              else
                st->done(std::move(st->fetches));
            }
          });
    }
  }
};

master::master(master_options options) : impl_(std::make_shared<impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.heartbeat_timeout.count() > 0)
    impl_->heartbeats = std::make_unique<heartbeat_monitor>(impl_->options.heartbeat_timeout);
}

master::~master() {
  std::unique_lock lock(impl_->mu);
  impl_->stopped = true;
  impl_->ep = nullptr;
  impl_->local_worker = nullptr;
  impl_->threads_cv.wait(lock, [&] { return impl_->threads == 0; });
  lock.unlock();
  impl_->heartbeats.reset();
}

void master::attach(net::endpoint* ep, net::worker_service* local_worker) {
  std::lock_guard lock(impl_->mu);
  impl_->ep = ep;
  impl_->local_worker = local_worker;
}

void master::create_session(std::string graph_bytes, bool cost_model,
                            net::callback<std::string> done) {
  auto g = parse_graph(graph_bytes, builtin_ops(), "the session's graph");
  if (!g) {
    done(g.error());
    return;
  }
  auto s = std::make_shared<master_session>();
  s->g = std::make_unique<graph>(std::move(g).value());
  s->cost_model = cost_model;
  auto i = impl_;
  // Waiting for tasks blocks: on a helper thread.
  i->spawn([i, s, done = std::move(done)] {
    status st = i->discover(*s);
    if (st.ok())
      st = i->place(*s);
    if (!st.ok()) {
      done(st.with_context("creating a session"));
      return;
    }
    {
      std::lock_guard lock(i->mu);
      s->handle = "session-" + std::to_string(++i->next_session);
      i->sessions.emplace(s->handle, s);
    }
    i->log("info", s->handle + " created: " + std::to_string(s->g->num_nodes()) +
                       " nodes over " + std::to_string(s->devices.size()) + " devices");
    done(s->handle);
  });
}

void master::extend_session(const std::string& handle, std::string graph_bytes,
                            std::function<void(status)> done) {
  std::shared_ptr<master_session> s;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->sessions.find(handle);
    if (it != impl_->sessions.end())
      s = it->second;
  }
  if (!s) {
    done(not_found("no session '" + handle + "' on this master"));
    return;
  }
  // The graph may change only between builds, and a build may be waiting on the network.
  impl_->spawn([i = impl_, s, graph_bytes = std::move(graph_bytes), done = std::move(done)] {
    auto g = parse_graph(graph_bytes, builtin_ops(), "the session's extended graph");
    if (!g) {
      done(g.error());
      return;
    }
    std::lock_guard lock(s->build_mu);
    int old = s->g->num_nodes();
    if (g->num_nodes() < old) {
      done(invalid_argument("extending a session: the new graph has fewer nodes (" +
                            std::to_string(g->num_nodes()) + ") than the old (" +
                            std::to_string(old) + ")"));
      return;
    }
    for (int v = 0; v < old; ++v)
      if (g->at(v).name != s->g->at(v).name || g->at(v).op != s->g->at(v).op) {
        done(invalid_argument("extending a session: node " + std::to_string(v) + " is '" +
                              g->at(v).name + "', was '" + s->g->at(v).name +
                              "' (a graph may only grow)"));
        return;
      }
    auto previous = std::move(s->g);
    s->g = std::make_unique<graph>(std::move(g).value());
    status st = i->place(*s);
    if (!st.ok()) {
      s->g = std::move(previous);
      done(st);
      return;
    }
    // Registered partitions refer to the old graph object only through their bytes: valid.
    done({});
  });
}

void master::run(const std::string& handle, net::named_tensors feeds,
                 std::vector<std::string> fetches, std::vector<std::string> targets,
                 net::callback<std::vector<tensor>> done) {
  std::shared_ptr<master_session> s;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->sessions.find(handle);
    if (it != impl_->sessions.end())
      s = it->second;
  }
  if (!s) {
    done(not_found("no session '" + handle + "' on this master (closed, or the master's node "
                   "restarted)"));
    return;
  }
  std::string key;
  for (auto& f : feeds)
    key += f.first + ",";
  key += "|";
  for (auto& f : fetches)
    key += f + ",";
  key += "|";
  for (auto& t : targets)
    key += t + ",";
  std::shared_ptr<registration> reg;
  {
    std::lock_guard lock(s->mu);
    auto it = s->registered.find(key);
    if (it != s->registered.end())
      reg = it->second;
  }
  auto i = impl_;
  size_t num_fetches = fetches.size();
  if (reg) {
    i->start_step(s, reg, std::move(feeds), num_fetches, std::move(done));
    return;
  }
  // First run of this signature: registering waits on the tasks, so a helper thread does it.
  i->spawn([i, s, key, feeds = std::move(feeds), fetches = std::move(fetches),
            targets = std::move(targets), done = std::move(done), num_fetches]() mutable {
    result<std::shared_ptr<registration>> reg = internal_error("unset");
    {
      std::lock_guard build_lock(s->build_mu);
      bool found = false;
      {
        std::lock_guard lock(s->mu);
        auto it = s->registered.find(key);
        if ((found = it != s->registered.end()))
          reg = it->second;
      }
      if (!found) {
        reg = i->build(*s, feeds, fetches, targets);
        if (reg) {
          std::lock_guard lock(s->mu);
          s->registered.emplace(key, *reg);
        }
      }
    }
    if (!reg) {
      done(reg.error());
      return;
    }
    i->start_step(s, *reg, std::move(feeds), num_fetches, std::move(done));
  });
}

void master::close_session(const std::string& handle) {
  std::shared_ptr<master_session> s;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->sessions.find(handle);
    if (it == impl_->sessions.end())
      return;
    s = it->second;
    impl_->sessions.erase(it);
  }
  std::lock_guard lock(s->mu);
  for (auto& [key, reg] : s->registered)
    for (auto& p : reg->parts)
      p.worker->deregister_graph(p.handle);
  s->registered.clear();
}

} // namespace runnel
