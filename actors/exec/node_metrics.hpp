#pragma once
// What a cluster node counts, in Prometheus' text format (served by runnel-node --metrics).
#include <cstdint>
#include <string>

namespace runnel {
class runtime;
namespace net {
class endpoint;
}

/// Steps, connections, refusals and limits hit, bytes per peer, unclaimed tensors, queue depths,
/// accumulators (stale gradients dropped) and the process's memory, descriptors and threads.
std::string node_metrics_text(runtime& rt, const net::endpoint& ep, const std::string& task,
                              uint64_t steps_ok, uint64_t steps_failed);

/// This process's resident memory, open descriptors and threads, from /proc (0 where unknown).
struct process_gauges {
  uint64_t resident_bytes = 0;
  int64_t open_fds = 0;
  int64_t threads = 0;
};
process_gauges read_process_gauges();

} // namespace runnel
