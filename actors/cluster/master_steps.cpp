// The master's per-signature work: pruning a session's graph for a signature, partitioning it
// per task and registering the partitions (build), and running steps of a registration
// (start_step).
#include "runnel/actors/cluster/master.hpp"

#include "runnel/actors/cluster/master_impl.hpp"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "runnel/actors/cluster/heartbeat.hpp"
#include "runnel/actors/exec/internal.hpp"
#include "runnel/net/graph_def.hpp"
#include "runnel/placement/cost_model.hpp"
#include "runnel/placement/partition.hpp"
#include "runnel/placement/placer.hpp"
#include "runnel/placement/prune.hpp"

namespace runnel {

namespace {

/// Fed tensors that are not a Placeholder's output become Placeholders of their own, so the
/// nodes behind them are pruned and their tasks need not run them. Fills `feed_names` (what each
/// feed is called in the graph the steps run) and `device_of` for the new placeholders; null when
/// every feed is a Placeholder's output already.
result<std::unique_ptr<graph>> feeds_as_placeholders(const graph& base,
                                                     const net::named_tensors& feeds,
                                                     std::map<std::string, std::string>& device_of,
                                                     std::vector<std::string>& feed_names) {
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
    def.nodes.insert(def.nodes.begin(), node_def{ph,
                                                 "Placeholder",
                                                 {},
                                                 device_of[n.name],
                                                 {{"dtype", n.output_types[size_t(e->index)]},
                                                  {"shape", n.output_shapes[size_t(e->index)]}}});
    device_of[ph] = device_of[n.name];
    feed_names.push_back(ph + ":0");
  }
  if (!rewrite)
    return std::unique_ptr<graph>();
  auto g2 = from_graph_def(def, base.ops());
  if (!g2)
    return g2.error().with_context("rewriting fed tensors as placeholders");
  return std::make_unique<graph>(std::move(g2).value());
}

/// The fetches' names in `g` (a fetch of a fed tensor reads the placeholder that replaced it),
/// appending their nodes to `roots`.
result<std::vector<std::string>> fetch_names_in(const graph& g, const graph& base,
                                                const net::named_tensors& feeds,
                                                const std::vector<std::string>& feed_names,
                                                const std::vector<std::string>& fetches,
                                                std::vector<int>& roots) {
  std::vector<std::string> names;
  for (auto& f : fetches) {
    auto e = base.find_endpoint(f);
    if (!e)
      return e.error().with_context("fetch '" + f + "'");
    std::string name = base.at(e->node).name + ":" + std::to_string(e->index);
    for (size_t i = 0; i < feeds.size(); ++i) {
      auto fe = base.find_endpoint(feeds[i].first);
      if (fe && fe->node == e->node && fe->index == e->index)
        name = feed_names[i];
    }
    auto ge = g.find_endpoint(name);
    if (!ge)
      return ge.error().with_context("fetch '" + f + "'");
    names.push_back(name);
    roots.push_back(ge->node);
  }
  return names;
}

/// A NoOp that only gathers control edges from one device (an optimizer's `update` group over
/// one ps) and that nothing in the step waits for runs on that device: placed on another task, it
/// would cost each step a control Send/Recv pair per input and that task's wait for them after
/// the last update (measured: ~0.3 ms of a 5 ms ps_training step). The step still ends only when
/// every task has run its part.
void colocate_gathering_noops(const graph& g, const std::vector<int>& nodes,
                              std::vector<std::string>& devices) {
  std::vector<const std::string*> device_of_node(size_t(g.num_nodes()), nullptr);
  std::vector<char> consumed(size_t(g.num_nodes()), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    device_of_node[size_t(nodes[i])] = &devices[i];
    for (auto& e : g.at(nodes[i]).inputs)
      consumed[size_t(e.node)] = 1;
    for (int c : g.at(nodes[i]).control_inputs)
      consumed[size_t(c)] = 1;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const node& n = g.at(nodes[i]);
    if (n.op != "NoOp" || !n.inputs.empty() || n.control_inputs.empty() ||
        consumed[size_t(nodes[i])])
      continue;
    const std::string* there = device_of_node[size_t(n.control_inputs[0])];
    bool one_device = there != nullptr;
    for (int c : n.control_inputs)
      one_device = one_device && device_of_node[size_t(c)] && *device_of_node[size_t(c)] == *there;
    if (one_device)
      devices[i] = *there;
  }
}

/// The partitions pruned to what the roots need, grouped into one graph per task.
result<std::map<task_id, graph_def>>
graphs_per_task(const graph& g, const std::vector<int>& roots,
                const std::map<std::string, std::string>& device_of) {
  std::vector<char> needed = prune(g, roots);
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
  colocate_gathering_noops(g, nodes, devices);
  RUNNEL_ASSIGN_OR_RETURN(auto parts, partition(g, nodes, devices));
  std::map<task_id, graph_def> per_task;
  for (auto& p : parts) {
    RUNNEL_ASSIGN_OR_RETURN(auto t, task_of_device(p.device));
    auto& d = per_task[t];
    for (auto& n : p.nodes)
      d.nodes.push_back(std::move(n));
    d.seed = g.seed();
  }
  return per_task;
}

/// The indices and names of `names` whose nodes are among `here`.
void select_here(const std::set<std::string>& here, const std::vector<std::string>& names,
                 std::vector<size_t>& index, std::vector<std::string>& selected) {
  for (size_t i = 0; i < names.size(); ++i)
    if (here.count(names[i].substr(0, names[i].rfind(':')))) {
      index.push_back(i);
      selected.push_back(names[i]);
    }
}

} // namespace

result<std::shared_ptr<registration>> master::impl::build(master_session& s,
                                                          const net::named_tensors& feeds,
                                                          const std::vector<std::string>& fetches,
                                                          const std::vector<std::string>& targets) {
  const graph& base = *s.g;
  std::map<std::string, std::string> device_of; // by node name
  for (size_t v = 0; v < s.device_of_node.size(); ++v)
    device_of[base.at(int(v)).name] = s.device_of_node[v];
  std::vector<std::string> feed_names;
  RUNNEL_ASSIGN_OR_RETURN(auto rewritten,
                          feeds_as_placeholders(base, feeds, device_of, feed_names));
  const graph& g = rewritten ? *rewritten : base;
  // Prune: what the fetches and targets need (the fed tensors are placeholders by now).
  std::vector<int> roots;
  RUNNEL_ASSIGN_OR_RETURN(auto fetch_names,
                          fetch_names_in(g, base, feeds, feed_names, fetches, roots));
  for (auto& t : targets) {
    auto id = g.find(t);
    if (!id)
      return not_found("target '" + t + "': no node named '" + t + "' in the graph");
    roots.push_back(*id);
  }
  for (auto& f : feed_names)
    roots.push_back(g.find_endpoint(f).value().node);
  RUNNEL_ASSIGN_OR_RETURN(auto per_task, graphs_per_task(g, roots, device_of));
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
    select_here(here, feed_names, part.feed_index, part.feed_names);
    select_here(here, fetch_names, part.fetch_index, part.fetch_names);
    auto p = std::make_shared<std::promise<result<std::string>>>();
    pending.emplace_back(reg->parts.size(), p->get_future());
    part.worker->register_graph(serialize_graph_def(d),
                                [p](result<std::string> r) { p->set_value(std::move(r)); });
    reg->parts.push_back(std::move(part));
  }
  status failed;
  for (auto& [i, f] : pending) {
    auto r = wait_for(f, std::chrono::milliseconds(60000),
                      "registering a partition with task " + reg->parts[i].task.name());
    if (r)
      reg->parts[i].handle = *r;
    else if (failed.ok())
      failed =
          r.error().with_context("registering the partition of task " + reg->parts[i].task.name());
  }
  if (!failed.ok()) {
    for (auto& p : reg->parts)
      if (!p.handle.empty())
        p.worker->deregister_graph(p.handle);
    return failed;
  }
  auto tasks = std::make_shared<heartbeat_monitor::task_list>();
  for (auto& part : reg->parts)
    tasks->emplace_back(part.task.name(), part.worker);
  reg->heartbeat_tasks = std::move(tasks);
  return reg;
}

namespace {

/// Whether a task's failed runGraph says a task went away or restarted (its connections and the
/// session's registrations are then stale), rather than that a kernel failed. A kernel's own
/// UNAVAILABLE (a sync take naming missing workers) says nothing about connections, but that of
/// a _Send or _Recv does: the tensor's peer is gone.
bool lost_or_restarted(const status& e) {
  if (e.code() == error_code::aborted)
    return true;
  if (e.code() != error_code::unavailable)
    return false;
  const auto& m = e.message();
  bool from_kernel = m.find("node '") != std::string::npos && m.find("(op ") != std::string::npos;
  return !from_kernel || m.find("(op _Send)") != std::string::npos ||
         m.find("(op _Recv)") != std::string::npos;
}

/// One step in flight: what its tasks' answers have brought so far.
struct master_step {
  std::mutex mu;
  size_t remaining = 0;
  status first;
  bool cleaned = false;
  bool reported = false; ///< `done` ran (or a heartbeat failed the step first)
  std::vector<tensor> fetches;
  std::vector<net::traced_node> nodes; ///< traced steps: every task's, on this clock
  net::callback<net::traced<std::vector<tensor>>> done;
  std::shared_ptr<heartbeat_monitor::watch> heartbeat;
};

/// Fails a step from outside its tasks' answers (a task that stops answering heartbeats, a
/// client's cancel): every task cleans it up, and their answers, if they ever come, are ignored.
std::function<void(status)> step_failer(std::shared_ptr<master::impl> self,
                                        const std::shared_ptr<master_step>& st,
                                        const std::shared_ptr<master_session>& s,
                                        std::shared_ptr<registration> reg, int64_t id) {
  return [self, w = std::weak_ptr<master_step>(st), ws = std::weak_ptr<master_session>(s), reg,
          id](status why) {
    auto st = w.lock();
    if (!st)
      return;
    net::callback<net::traced<std::vector<tensor>>> done;
    {
      std::lock_guard lock(st->mu);
      if (st->reported)
        return;
      st->reported = st->cleaned = true;
      done = std::move(st->done);
    }
    if (auto s = ws.lock()) {
      std::lock_guard lock(s->mu);
      s->running.erase(id);
    }
    for (auto& part : reg->parts)
      part.worker->cleanup_step(id);
    self->log(why.code() == error_code::cancelled ? "info" : "warn",
              "step failed: " + why.message());
    done(std::move(why));
  };
}

} // namespace

void master::impl::start_step(std::shared_ptr<master_session> s, std::shared_ptr<registration> reg,
                              net::named_tensors feeds, size_t num_fetches, bool trace,
                              net::callback<net::traced<std::vector<tensor>>> done) {
  auto st = std::make_shared<master_step>();
  st->remaining = reg->parts.size();
  st->fetches.resize(num_fetches);
  st->done = std::move(done);
  if (reg->parts.empty()) {
    st->done(net::traced<std::vector<tensor>>{std::move(st->fetches), {}});
    return;
  }
  int64_t id = new_step_id();
  auto self = shared_from_this();
  auto fail = step_failer(self, st, s, reg, id);
  if (heartbeats)
    st->heartbeat = heartbeats->start(reg->heartbeat_tasks, fail);
  {
    std::lock_guard lock(s->mu);
    s->running.emplace(id, fail);
  }
  for (size_t p = 0; p < reg->parts.size(); ++p) {
    auto& part = reg->parts[p];
    net::named_tensors part_feeds;
    for (size_t i = 0; i < part.feed_index.size(); ++i)
      part_feeds.emplace_back(part.feed_names[i], feeds[part.feed_index[i]].second);
    int64_t sent = trace ? net::steady_ns() : 0;
    auto on_reply = [self, s, reg, st, p, id, sent,
                     trace](result<net::traced<net::named_tensors>> r) {
      auto& part = reg->parts[p];
      bool cleanup = false, finished = false;
      int64_t got = trace ? net::steady_ns() : 0;
      {
        std::lock_guard lock(st->mu);
        if (r && trace) {
          // The call itself, on a track of the master's, then the task's nodes on this clock.
          st->nodes.push_back({"runGraph " + part.task.name(), "_RunGraph",
                               "master: runGraph calls", sent, got, 0});
          net::align_trace(r->trace, sent, got, st->nodes);
        }
        if (!r) {
          if (st->first.ok())
            st->first = r.error().with_context("task " + part.task.name());
          if (!st->cleaned) {
            st->cleaned = true;
            cleanup = true;
          }
        } else {
          for (size_t i = 0; i < part.fetch_index.size() && i < r->value.size(); ++i)
            st->fetches[part.fetch_index[i]] = std::move(r->value[i].second);
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
      }
      // Every failed reply, not only the first: when a task dies, the first error to come may
      // be another task's (the ps's send to it), and the dead one's registration must go too.
      if (!r && lost_or_restarted(r.error())) {
        // A task went away or restarted: fresh connections and registrations next run.
        self->forget_task(part.task);
        std::lock_guard lock(s->mu);
        s->registered.clear();
        if (cleanup)
          self->log("warn", "step failed: " + r.error().message() +
                                "; partitions will be registered again");
      }
      if (finished) {
        {
          std::lock_guard lock(s->mu);
          s->running.erase(id);
        }
        if (!st->first.ok())
          st->done(st->first);
        else
          st->done(net::traced<std::vector<tensor>>{std::move(st->fetches),
                                                    {std::move(st->nodes), 0, 0}});
      }
    };
    if (trace)
      part.worker->run_graph_traced(part.handle, id, std::move(part_feeds), part.fetch_names,
                                    std::move(on_reply));
    else
      part.worker->run_graph(part.handle, id, std::move(part_feeds), part.fetch_names,
                             net::with_empty_trace<net::named_tensors>(std::move(on_reply)));
  }
}

} // namespace runnel
