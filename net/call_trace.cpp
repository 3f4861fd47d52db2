// Traced calls across processes: node times on the serving process's steady clock, carried in
// replies (CallTrace) and aligned to the caller's clock (docs/cluster.md, "Traces").
#include <chrono>

#include "runnel/net/endpoint_impl.hpp"

namespace runnel::net {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void align_trace(call_trace& from, int64_t sent_ns, int64_t got_ns,
                 std::vector<traced_node>& into) {
  // The server's clock runs `offset` ahead of ours, somewhere in [replied - got, received - sent]
  // (the call was received after it was sent and replied before the reply came). When 0 is in
  // that range the clocks are taken to be one (processes on one machine share the steady clock:
  // simulated hosts), so nodes keep their own times; otherwise NTP's estimate, the middle, as if
  // the request took as long as the reply. On one machine the middle would be wrong by half the
  // difference of the two ways' delays (a reply held up on a busy link: milliseconds). Without
  // stamps (an untraced server) the nodes are taken as they are.
  int64_t offset = 0;
  if (from.received_ns != 0 || from.replied_ns != 0) {
    int64_t low = from.replied_ns - got_ns, high = from.received_ns - sent_ns;
    if (!(low <= 0 && 0 <= high))
      offset = (low + high) / 2;
  }
  for (auto& n : from.nodes) {
    n.start_ns -= offset;
    n.end_ns -= offset;
    into.push_back(std::move(n));
  }
  from.nodes.clear();
}

void worker_service::run_graph_traced(const std::string& handle, int64_t step_id,
                                      named_tensors feeds, std::vector<std::string> fetches,
                                      callback<traced<named_tensors>> done) {
  run_graph(handle, step_id, std::move(feeds), std::move(fetches),
            with_empty_trace<named_tensors>(std::move(done)));
}

void remote_worker::run_graph_traced(const std::string& handle, int64_t step_id,
                                     named_tensors feeds, std::vector<std::string> fetches,
                                     callback<traced<named_tensors>> done) {
  run_graph(handle, step_id, std::move(feeds), std::move(fetches),
            with_empty_trace<named_tensors>(std::move(done)));
}

void remote_worker::heartbeat(std::function<void(runnel::status)> done) {
  status([done = std::move(done)](result<worker_status> r) { done(r.error()); });
}

void master_service::run_traced(const std::string& handle, named_tensors feeds,
                                std::vector<std::string> fetches,
                                std::vector<std::string> targets,
                                callback<traced<std::vector<tensor>>> done) {
  run(handle, std::move(feeds), std::move(fetches), std::move(targets),
      with_empty_trace<std::vector<tensor>>(std::move(done)));
}

namespace detail {

void write_trace(wire::CallTrace::Builder b, const call_trace& t) {
  b.setReceivedNs(t.received_ns);
  b.setRepliedNs(t.replied_ns);
  auto nodes = b.initNodes(uint(t.nodes.size()));
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    auto n = nodes[uint(i)];
    auto& s = t.nodes[i];
    n.setNode(s.node);
    n.setOp(s.op);
    n.setDevice(s.device);
    n.setStartNs(s.start_ns);
    n.setEndNs(s.end_ns);
    n.setOutputBytes(s.output_bytes);
  }
}

call_trace read_trace(wire::CallTrace::Reader r) {
  call_trace t;
  t.received_ns = r.getReceivedNs();
  t.replied_ns = r.getRepliedNs();
  for (auto n : r.getNodes())
    t.nodes.push_back({to_std(n.getNode()), to_std(n.getOp()), to_std(n.getDevice()),
                       n.getStartNs(), n.getEndNs(), n.getOutputBytes()});
  return t;
}

} // namespace detail

} // namespace runnel::net
