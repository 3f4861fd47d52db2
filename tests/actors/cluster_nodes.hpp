#pragma once
// Cluster nodes inside one test process: a cluster spec on loopback ports, a node's options that
// log nothing, the runtime a test's client sessions share, and a ps and a worker started.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/tests/ports.hpp"

namespace runnel::testing {

inline cluster_spec local_cluster(const std::vector<std::string>& jobs, std::vector<int> ports) {
  std::string text;
  size_t p = 0;
  for (auto& job : jobs) {
    auto eq = job.find('=');
    std::string name = job.substr(0, eq);
    int count = std::stoi(job.substr(eq + 1));
    text += (text.empty() ? "" : ";") + name + "=";
    for (int i = 0; i < count; ++i) { // appended piece by piece: GCC 12 warns falsely on "a" + s
      text += i ? "," : "";
      text += "127.0.0.1:";
      text += std::to_string(ports[p++]);
    }
  }
  return cluster_spec::parse(text).value();
}

inline node_options quiet(cluster_spec spec, std::string job, int task) {
  node_options o;
  o.cluster = std::move(spec);
  o.job = std::move(job);
  o.task = task;
  o.log = [](const std::string&, const std::string&) {};
  o.startup_timeout = std::chrono::milliseconds(3000);
  return o;
}

inline runtime& client_runtime() {
  static runtime* rt = new runtime; // never destroyed: see tests/eval.hpp
  return *rt;
}

/// A ps and a worker task on loopback ports, started.
struct ps_and_worker {
  cluster_spec spec;
  std::unique_ptr<cluster_node> ps, worker;
  /// A session's target: the worker's node.
  std::string target() const { return "runnel://" + spec.address("worker", 0).value(); }
};

inline ps_and_worker start_ps_and_worker() {
  ps_and_worker n{local_cluster({"ps=1", "worker=1"}, free_ports(2)), nullptr, nullptr};
  n.ps = cluster_node::start(quiet(n.spec, "ps", 0)).value();
  n.worker = cluster_node::start(quiet(n.spec, "worker", 0)).value();
  return n;
}

} // namespace runnel::testing
