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
#include <vector>

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
  /// As run; the reply's trace has every task's nodes, and each runGraph call, on this clock.
  void run_traced(const std::string& handle, net::named_tensors feeds,
                  std::vector<std::string> fetches, std::vector<std::string> targets,
                  net::callback<net::traced<std::vector<tensor>>> done) override;
  void close_session(const std::string& handle) override;
  void cancel_steps(const std::string& handle, std::function<void(status)> done) override;

  struct impl;

private:
  void run_step(const std::string& handle, net::named_tensors feeds,
                std::vector<std::string> fetches, std::vector<std::string> targets, bool trace,
                net::callback<net::traced<std::vector<tensor>>> done);
  std::shared_ptr<impl> impl_;
};

/// Registers `m` as serving `addresses` ("host:port") in this process until the returned handle
/// is released (which waits for a call being started on it): sessions whose target names one
/// of them, presenting the same `credentials` (local_master_credentials), call it directly, not
/// over the network (local_master.cpp).
std::shared_ptr<void> register_local_master(const std::vector<std::string>& addresses,
                                            const std::string& credentials,
                                            net::master_service& m);
/// The master serving `address` in this process for these credentials, or null.
std::shared_ptr<net::remote_master> find_local_master(const std::string& address,
                                                     const std::string& credentials);
/// What a session presents and a node requires, compared for a local call: the auth token and
/// whether TLS is on.
inline std::string local_master_credentials(const std::string& auth_token, bool tls) {
  return (tls ? "tls:" : "tcp:") + auth_token;
}

} // namespace runnel
