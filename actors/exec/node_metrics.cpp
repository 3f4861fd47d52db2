#include "runnel/actors/exec/node_metrics.hpp"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "runnel/actors/exec/internal.hpp"
#include "runnel/net/endpoint.hpp"
#include "runnel/net/metrics_server.hpp"

namespace runnel {

process_gauges read_process_gauges() {
  process_gauges g;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream in(line.substr(line.find(':') + 1));
    if (line.rfind("VmRSS:", 0) == 0) {
      uint64_t kib = 0;
      in >> kib;
      g.resident_bytes = kib * 1024;
    } else if (line.rfind("Threads:", 0) == 0) {
      in >> g.threads;
    }
  }
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (auto* e = ::readdir(d))
      if (e->d_name[0] != '.')
        ++g.open_fds;
    ::closedir(d);
    --g.open_fds; // the directory's own descriptor
  }
  return g;
}

std::string node_metrics_text(runtime& rt, const net::endpoint& ep, const std::string& task,
                              uint64_t steps_ok, uint64_t steps_failed) {
  using net::metric_line;
  std::string out;
  auto counter = [&](const std::string& name, const std::string& help, double v,
                     std::vector<std::pair<std::string, std::string>> labels = {}) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n";
    labels.insert(labels.begin(), {"task", task});
    out += metric_line(name, v, labels);
  };
  auto gauge_head = [&](const std::string& name, const std::string& help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
  };
  counter("runnel_steps_total", "Partition steps this worker ran.", double(steps_ok),
          {{"result", "ok"}});
  out += metric_line("runnel_steps_total", double(steps_failed),
                     {{"task", task}, {"result", "failed"}});
  auto& s = ep.stats();
  counter("runnel_connections_accepted_total", "Connections past the handshake.",
          double(s.connections_accepted.load()));
  counter("runnel_connections_refused_total", "Connections refused, by reason.",
          double(s.connections_rejected.load()), {{"reason", "bad_preamble_or_token"}});
  out += metric_line("runnel_connections_refused_total", double(s.connections_refused_busy.load()),
                     {{"task", task}, {"reason", "connection_limit"}});
  out += metric_line("runnel_connections_refused_total", double(s.handshake_timeouts.load()),
                     {{"task", task}, {"reason", "handshake_timeout"}});
  counter("runnel_connections_idle_closed_total", "Connections closed after the idle timeout.",
          double(s.idle_closed.load()));
  counter("runnel_accept_errors_total", "accept() failures (e.g. out of descriptors).",
          double(s.accept_errors.load()));
  counter("runnel_rpcs_refused_total", "RPC calls refused over max_pending_rpcs.",
          double(s.rpcs_refused.load()));
  counter("runnel_frames_received_total", "Data-plane tensor frames received.",
          double(s.frames_received.load()));
  counter("runnel_frames_rejected_total", "Malformed or oversized data-plane frames.",
          double(s.frames_rejected.load()));
  uint64_t sent = s.frames_sent.load(), by_ring = s.frames_sent_shm.load();
  counter("runnel_frames_sent_total",
          "Data-plane tensor frames sent, by the way their payload went.",
          double(sent - std::min(sent, by_ring)), {{"via", "socket"}});
  out += metric_line("runnel_frames_sent_total", double(by_ring),
                     {{"task", task}, {"via", "shared_memory"}});
  counter("runnel_shm_ring_full_total",
          "Payloads large enough for a peer's shared-memory ring that found it full and went on "
          "the socket.",
          double(s.frames_shm_full.load()));
  gauge_head("runnel_connections_open", "Accepted connections open now.");
  out += metric_line("runnel_connections_open", double(s.connections_open.load()), {{"task", task}});
  auto traffic = ep.traffic_by_peer();
  out += "# HELP runnel_peer_bytes_total Data-plane bytes by peer and direction.\n"
         "# TYPE runnel_peer_bytes_total counter\n";
  for (auto& [peer, t] : traffic) {
    if (t.bytes_received)
      out += metric_line("runnel_peer_bytes_total", double(t.bytes_received),
                         {{"task", task}, {"peer", peer}, {"direction", "received"}});
    if (t.bytes_sent)
      out += metric_line("runnel_peer_bytes_total", double(t.bytes_sent),
                         {{"task", task}, {"peer", peer}, {"direction", "sent"}});
  }
  auto& rv = rt.internals().rendezvous;
  gauge_head("runnel_unclaimed_tensor_bytes",
             "Bytes of received tensors for steps not running here.");
  out += metric_line("runnel_unclaimed_tensor_bytes", double(rv.unclaimed_bytes()), {{"task", task}});
  counter("runnel_unclaimed_tensors_dropped_total",
          "Received tensors dropped: their step never ran here in time, or over the byte limit.",
          double(rv.unclaimed_dropped()));
  std::vector<std::pair<std::string, int64_t>> queues;
  std::vector<std::pair<std::string, accumulator_resource::stats>> accs;
  for (auto& d : rt.internals().devices)
    if (d.resources)
      d.resources->gauges(queues, accs);
  gauge_head("runnel_queue_size", "Elements in each queue.");
  for (auto& [name, n] : queues)
    out += metric_line("runnel_queue_size", double(n), {{"task", task}, {"queue", name}});
  out += "# HELP runnel_accumulator_stale_gradients_dropped_total Stale gradients an "
         "accumulator dropped (synchronous training).\n"
         "# TYPE runnel_accumulator_stale_gradients_dropped_total counter\n";
  for (auto& [name, st] : accs)
    out += metric_line("runnel_accumulator_stale_gradients_dropped_total", double(st.dropped),
                       {{"task", task}, {"accumulator", name}});
  out += "# HELP runnel_accumulator_refused_gradients_total Second gradients of one replica for "
         "one step an accumulator refused.\n"
         "# TYPE runnel_accumulator_refused_gradients_total counter\n";
  for (auto& [name, st] : accs)
    out += metric_line("runnel_accumulator_refused_gradients_total", double(st.refused),
                       {{"task", task}, {"accumulator", name}});
  auto p = read_process_gauges();
  gauge_head("runnel_process_resident_bytes", "Resident memory.");
  out += metric_line("runnel_process_resident_bytes", double(p.resident_bytes), {{"task", task}});
  gauge_head("runnel_process_open_fds", "Open file descriptors.");
  out += metric_line("runnel_process_open_fds", double(p.open_fds), {{"task", task}});
  gauge_head("runnel_process_threads", "Threads.");
  out += metric_line("runnel_process_threads", double(p.threads), {{"task", task}});
  return out;
}

} // namespace runnel
