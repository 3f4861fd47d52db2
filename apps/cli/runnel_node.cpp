// runnel-node: one task of a Runnel cluster. Serves the worker and master services and the
// tensor data plane on the task's address until SIGINT or SIGTERM.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/ops/core/atomic_file.hpp"
#include "runnel/apps/support/app_support.hpp"

using namespace runnel;

namespace {

const char* usage = R"(runnel-node: one task (process) of a Runnel cluster.

usage: runnel-node --cluster SPEC --job NAME --task I [options]

  --cluster SPEC          jobs and their tasks' addresses, e.g.
                          "ps=127.0.0.1:2222;worker=127.0.0.1:2223,127.0.0.1:2224"
  --cluster-file FILE     the same from a file (one job per line allowed, '#' comments)
  --job NAME --task I     which task this process is
  --listen HOST:PORT      where to listen (default: the task's address in the spec; use
                          0.0.0.0:PORT to accept on every interface). An address other hosts
                          can reach needs --auth-token-file or --allow-unauthenticated
  --allow-unauthenticated serve peers without a token on a non-loopback address (trusted
                          networks only: any peer could register and run graphs)
  --tls-cert FILE --tls-key FILE --tls-ca FILE
                          TLS on both planes (PEM): this node's certificate and key, and the CA
                          every peer's certificate must be signed by (docs/reliability.md)
  --metrics HOST:PORT     serve Prometheus metrics on GET /metrics (docs/reliability.md)
  --idle-timeout S        close accepted connections idle this long (default 300; 0: never)
  --cpu-devices N         virtual CPU devices, each with its share of the cores (default 1)
  --simulated-gpus N      add N simulated GPUs (host memory; docs/gpu.md) after the real ones
  --auth-token-file FILE  require peers to present this shared secret (and present it)
  --startup-timeout S     how long a master waits for the other tasks (default 10)
  --heartbeat-timeout S   fail a step whose task leaves a heartbeat unanswered this long while
                          its connection stays open (stopped, hung); 0: off (default 30)
  --no-traffic-classes    do not mark traffic (by default, in DSCP: calls EF, a ps task's
                          tensors AF41, other tensors CS1, for links that honour it:
                          docs/scaling.md, "Traffic classes")
  --port-file FILE        write the bound port here once serving (for scripts and tests)
  --help                  this text

The node logs key=value lines on stderr and stops cleanly on SIGINT or SIGTERM. Clients connect
with session(rt, graph, "runnel://HOST:PORT") to any task: its master runs the graph over the
whole cluster (docs/cluster.md).
)";

std::atomic<int> stop_signal{0};

/// A node holds a descriptor per connection: take the hard limit rather than the usual 1024 soft
/// one (running out once used to stop accepting for good; it now only pauses accepting).
void raise_descriptor_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
}

void on_signal(int sig) {
  stop_signal = sig;
}

int run(const apps::flags& f) {
  if (f.has("cluster") == f.has("cluster-file")) {
    std::fprintf(stderr, "runnel-node: give exactly one of --cluster and --cluster-file\n%s",
                 usage);
    return 2;
  }
  auto spec = f.has("cluster") ? cluster_spec::parse(f.get("cluster", ""))
                               : cluster_spec::load(f.get("cluster-file", ""));
  throw_if_error(spec.error());
  if (!f.has("job") || !f.has("task")) {
    std::fprintf(stderr, "runnel-node: --job and --task are required\n");
    return 2;
  }
  node_options o;
  o.cluster = *spec;
  o.job = f.get("job", "");
  o.task = int(f.get_int("task", 0).value());
  o.listen = f.get("listen", "");
  o.cpu_devices = int(f.get_int("cpu-devices", 1).value());
  o.simulated_gpus = int(f.get_int("simulated-gpus", 0).value());
  if (o.simulated_gpus < 0)
    throw error(invalid_argument("--simulated-gpus must be >= 0"));
  o.startup_timeout =
      std::chrono::milliseconds(int64_t(f.get_double("startup-timeout", 10).value() * 1000));
  o.heartbeat_timeout =
      std::chrono::milliseconds(int64_t(f.get_double("heartbeat-timeout", 30).value() * 1000));
  if (f.has("auth-token-file"))
    o.auth_token = apps::read_token(f.get("auth-token-file", "")).value();
  o.allow_unauthenticated = f.has("allow-unauthenticated");
  o.traffic_classes = !f.has("no-traffic-classes");
  o.metrics = f.get("metrics", "");
  o.tls_cert = f.get("tls-cert", "");
  o.tls_key = f.get("tls-key", "");
  o.tls_ca = f.get("tls-ca", "");
  o.idle_timeout =
      std::chrono::milliseconds(int64_t(f.get_double("idle-timeout", 300).value() * 1000));
  raise_descriptor_limit();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  auto node = cluster_node::start(o);
  throw_if_error(node.error());
  if (f.has("port-file")) {
    throw_if_error(
        write_file_atomically(f.get("port-file", ""), std::to_string((*node)->port()) + "\n"));
  }
  while (stop_signal.load() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  log_line("info", std::string("stopping on ") + (stop_signal.load() == SIGINT ? "SIGINT" : "SIGTERM"));
  node->reset();
  log_line("info", "stopped");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return apps::app_main("runnel-node", argc, argv, usage,
                        {"cluster", "cluster-file", "job", "task", "listen", "cpu-devices", "simulated-gpus",
                         "auth-token-file", "allow-unauthenticated", "metrics", "idle-timeout", "tls-cert", "tls-key", "tls-ca",
                         "startup-timeout", "heartbeat-timeout", "port-file", "no-traffic-classes"},
                        run);
}
