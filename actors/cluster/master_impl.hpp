#pragma once
// The master's state (actors/cluster/master.cpp, master_steps.cpp): its sessions, their
// registrations per signature, the partitions registered with each task. Private to
// actors/cluster/.
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <random>

#include <set>
#include <thread>

#include "runnel/actors/cluster/heartbeat.hpp"
#include "runnel/actors/cluster/master.hpp"
#include "runnel/actors/exec/internal.hpp"
#include "runnel/net/graph_def.hpp"
#include "runnel/placement/cost_model.hpp"
#include "runnel/placement/partition.hpp"
#include "runnel/placement/placer.hpp"

namespace runnel {
namespace master_detail {

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
  void run_graph_traced(const std::string& handle, int64_t step_id, net::named_tensors feeds,
                        std::vector<std::string> fetches,
                        net::callback<net::traced<net::named_tensors>> done) override {
    w_.run_graph_traced(handle, step_id, std::move(feeds), std::move(fetches), std::move(done));
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
  /// The parts' tasks for heartbeats, built once (steps share it).
  std::shared_ptr<const heartbeat_monitor::task_list> heartbeat_tasks;
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
  /// Steps in flight, by step id: what fails each (cancel_steps). Guarded by `mu`.
  std::map<int64_t, std::function<void(status)>> running;
};


} // namespace master_detail

using namespace master_detail;

struct master::impl : std::enable_shared_from_this<master::impl> {
  master_options options;
  std::mutex mu;
  net::endpoint* ep = nullptr;
  net::worker_service* local_worker = nullptr;
  bool stopped = false;
  int threads = 0; // helper threads running (builds, discovery), endpoint calls outside `mu`
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

  /// Drops the connections to `t` so the next run dials it afresh. Called without `mu` held, and
  /// `mu` is not held across the endpoint's call: that call fails the task's other outstanding
  /// calls at once, on this thread, and their callbacks take `mu` (holding it hung a worker whose
  /// ps was killed). `threads` keeps the endpoint alive meanwhile, as a stopping master waits.
  void forget_task(const task_id& t) {
    net::endpoint* endpoint = nullptr;
    std::string address;
    {
      std::lock_guard lock(mu);
      auto a = options.cluster.address(t);
      if (stopped || !ep || !a)
        return;
      address = *a;
      endpoint = ep;
      ++threads;
    }
    endpoint->forget_peer(address);
    std::lock_guard lock(mu);
    if (--threads == 0)
      threads_cv.notify_all();
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

  /// Prunes, partitions per task and registers one signature (master_steps.cpp).
  result<std::shared_ptr<registration>> build(master_session& s, const net::named_tensors& feeds,
                                              const std::vector<std::string>& fetches,
                                              const std::vector<std::string>& targets);
  /// Runs one step of a registered signature; `done` gets the fetches or the first error
  /// (master_steps.cpp).
  void start_step(std::shared_ptr<master_session> s, std::shared_ptr<registration> reg,
                  net::named_tensors feeds, size_t num_fetches, bool trace,
                  net::callback<net::traced<std::vector<tensor>>> done);
};

} // namespace runnel
