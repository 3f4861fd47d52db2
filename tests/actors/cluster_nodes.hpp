#pragma once
// Cluster nodes inside one test process: a cluster spec on loopback ports, a node's options that
// log nothing, and the runtime a test's client sessions share.
#include <chrono>
#include <string>
#include <vector>

#include "runnel/actors/cluster/cluster.hpp"

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

} // namespace runnel::testing
