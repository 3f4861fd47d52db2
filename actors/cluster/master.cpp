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

namespace runnel {

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
  run_step(handle, std::move(feeds), std::move(fetches), std::move(targets), false,
           net::without_trace<std::vector<tensor>>(std::move(done)));
}

void master::run_traced(const std::string& handle, net::named_tensors feeds,
                        std::vector<std::string> fetches, std::vector<std::string> targets,
                        net::callback<net::traced<std::vector<tensor>>> done) {
  run_step(handle, std::move(feeds), std::move(fetches), std::move(targets), true,
           std::move(done));
}

void master::run_step(const std::string& handle, net::named_tensors feeds,
                      std::vector<std::string> fetches, std::vector<std::string> targets,
                      bool trace, net::callback<net::traced<std::vector<tensor>>> done) {
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
    i->start_step(s, reg, std::move(feeds), num_fetches, trace, std::move(done));
    return;
  }
  // First run of this signature: registering waits on the tasks, so a helper thread does it.
  i->spawn([i, s, key, feeds = std::move(feeds), fetches = std::move(fetches),
            targets = std::move(targets), done = std::move(done), num_fetches, trace]() mutable {
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
    i->start_step(s, *reg, std::move(feeds), num_fetches, trace, std::move(done));
  });
}

void master::cancel_steps(const std::string& handle, std::function<void(status)> done) {
  std::shared_ptr<master_session> s;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->sessions.find(handle);
    if (it == impl_->sessions.end()) {
      done(not_found("no session '" + handle + "' on this master"));
      return;
    }
    s = it->second;
  }
  std::vector<std::function<void(status)>> fails;
  {
    std::lock_guard lock(s->mu);
    for (auto& [id, fail] : s->running)
      fails.push_back(fail);
  }
  impl_->log("info", "cancelling " + std::to_string(fails.size()) + " step(s) of session " +
                         handle + " at its client's request");
  for (auto& fail : fails)
    fail(cancelled("the step was cancelled by its client"));
  done({});
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
