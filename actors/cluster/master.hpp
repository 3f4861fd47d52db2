#pragma once
// The master: runs graphs over a cluster. It discovers the tasks' devices, places each session's
// graph over all of them (the placement issue's constraints and policies, with network link
// costs), cuts each run signature's pruned graph into one partition per task (placement/
// partition.hpp), registers the partitions with the tasks' workers, and drives steps: one
// runGraph per task with a shared random step id, the first error wins and the other tasks are
// told to clean the step up. Internal to actors/ (cluster.cpp serves it; net/ carries it).

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "runnel/net/cluster_spec.hpp"
#include "runnel/net/endpoint.hpp"

namespace runnel {

struct master_options {
  cluster_spec cluster;
  /// The task this master runs in, if any: its devices come first in placement order, and its
  /// worker is called directly.
  std::optional<task_id> self;
  std::chrono::milliseconds startup_timeout{10000};
  std::function<void(const std::string& level, const std::string& message)> log;
  /// A step fails with `unavailable` naming a task that leaves a heartbeat unanswered this long
  /// (actors/cluster/heartbeat.hpp); 0: no heartbeats.
  std::chrono::milliseconds heartbeat_timeout{30000};
};

class master : public net::master_service {
public:
  explicit master(master_options options);
  ~master() override;
  /// Where remote workers are reached, and this task's own worker (may be null).
  void attach(net::endpoint* ep, net::worker_service* local_worker);

  void create_session(std::string graph_bytes, bool cost_model,
                      net::callback<std::string> done) override;
  void extend_session(const std::string& handle, std::string graph_bytes,
                      std::function<void(status)> done) override;
  void run(const std::string& handle, net::named_tensors feeds, std::vector<std::string> fetches,
           std::vector<std::string> targets, net::callback<std::vector<tensor>> done) override;
  void close_session(const std::string& handle) override;

  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

} // namespace runnel
