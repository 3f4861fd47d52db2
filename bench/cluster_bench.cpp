// Cluster benchmarks, each between real processes on loopback:
//   remote_tensor_64mib  a 64 MiB tensor through the data plane to another process (sent, received
//                        into its tensor, acknowledged), against raw TCP moving the same bytes
//                        between the same two processes into a reused buffer
//   remote_tensor_exchange  ps_training's 1.6 MB weight matrix to another process's endpoint
//                        and back, median µs, the sending thread writing its frames against the
//                        event loop writing them, in alternating rounds
//   ps_training          Fashion-MNIST's MLP (784-512-10, Adam, batches of 100) with its parameters
//                        on a ps process and this process as the worker, against a local session
//                        in the same process, in 10 interleaved rounds of 100 steps each (the
//                        medians of the rounds' ratios, with their ranges); then
//                        ps_training_bound: its step time against max(the local step, the
//                        step's bytes on the wire / the data plane's bandwidth measured here), and
//                        ps_training_prefetch: the same with 2 steps in flight (each pulls its
//                        parameters while the other finishes); --trace-dir DIR writes one
//                        distributed step's Chrome trace; ps_training_serial_limit: its step
//                        against the local step plus raw TCP moving the parameters out and
//                        back between two processes (a synchronous step overlaps neither), and
//                        ps_training_cpu_limit: its CPU against the local CPU plus the
//                        exchange's CPU
//   remote_step          a trivial step through a runnel-node (client -> master -> worker -> back),
//                        median µs, beside a raw TCP round trip of a few bytes; remote_step_busy
//                        the same with one core kept busy (an idle VM's cores wake slowly);
//                        remote_control_call(_busy) a bare step-connection call (a heartbeat)
//                        to the same node, remote_rpc_call(_busy) a bare getStatus RPC;
//                        remote_step_client_master(_busy) the step with a master in this process
//   ps_training_cpu      the CPU time per step of ps_training's two processes against the local
//                        session's
//   sparse_ps_update     an embedding of 1M x 64 float32 split over 2 ps processes, 1,000 distinct
//                        rows looked up and updated (SGD) per step by this process as the worker:
//                        bytes on the wire per step against the touched rows moved once each way
// Each prints `bench <name>: <figure> <unit> (<ratio>x <reference>)`.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster_limits.hpp"
#include "cpu_info.hpp"
#include "runnel/ops/core/atomic_file.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/train/replica.hpp"
#include "runnel/ops/train/sync_replicas.hpp"
#include "runnel/net/endpoint.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/layers/embedding.hpp"

using namespace runnel;
using namespace runnel::bench;

namespace {
// ---- remote steps through runnel-node ------------------------------------------------------------

/// Writes `md` as a Chrome trace to `path`.
void write_trace(const run_metadata& md, const std::string& path) {
  if (status s = write_file_atomically(path, md.to_chrome_trace()); !s.ok())
    std::fprintf(stderr, "cluster_bench: %s\n", s.to_string().c_str());
}

/// Medians, in seconds, of: a trivial remote step through a runnel-node; the same step from a
/// session with a master of its own (session_options::client_master: one runGraph per step); a
/// bare step-connection call to the same node (a heartbeat: nothing behind it); and a bare
/// Cap'n Proto RPC call (getStatus, through both event loops).
struct remote_step_figures {
  double step = 0, client_master_step = 0, control_call = 0, rpc_call = 0;
};

/// The medians of remote_step_figures; with `trace_path`, also writes the trace of the median of
/// 21 traced steps.
remote_step_figures remote_step(const std::string& node_binary, int rounds,
                                const std::string& trace_path = {}) {
  remote_step_figures out;
  int port;
  {
    int a = listen_any(port);
    ::close(a);
  }
  std::string address = "127.0.0.1:" + std::to_string(port);
  std::string cluster = "worker=" + address;
  pid_t child = ::fork();
  if (child == 0) {
    ::execl(node_binary.c_str(), node_binary.c_str(), "--cluster", cluster.c_str(), "--job",
            "worker", "--task", "0", static_cast<char*>(nullptr));
    _exit(127);
  }
  auto* rt = new runtime; // never destroyed: see tests/eval.hpp
  graph g;
  auto x = placeholder(g, dtype::f32, {}, "x");
  auto y = x + 1.0;
  session s(*rt, g, "runnel://" + address);
  feed_list feeds{{x, tensor::scalar<float>(1)}};
  // Wait for the node to listen.
  for (int i = 0; i < 500; ++i) {
    if (s.run(feeds, {y}).ok())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto median_step = [&](session& on) {
    for (int i = 0; i < 200; ++i)
      throw_if_error(on.run(feeds, {y}).error());
    std::vector<double> times;
    for (int r = 0; r < rounds; ++r) {
      double t0 = now();
      throw_if_error(on.run(feeds, {y}).error());
      times.push_back(now() - t0);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  out.step = median_step(s);
  {
    session own(*rt, g, "runnel://" + address, session_options{.client_master = true});
    out.client_master_step = median_step(own);
    own.close();
  }
  // Bare calls, through an endpoint of this process: a heartbeat on the step connection (read
  // and answered by the node's connection thread), and a getStatus RPC (answered on the node's
  // event loop); neither reaches a master or an executor.
  {
    auto ep = net::endpoint::start({}).value();
    auto w = ep->worker(address);
    auto median_call = [&](auto start) {
      std::vector<double> times;
      for (int r = 0; r < rounds; ++r) {
        std::promise<void> got;
        double t0 = now();
        start(got);
        got.get_future().wait();
        if (r >= 100)
          times.push_back(now() - t0);
      }
      std::sort(times.begin(), times.end());
      return times[times.size() / 2];
    };
    out.control_call = median_call(
        [&](std::promise<void>& got) { w->heartbeat([&](status) { got.set_value(); }); });
    out.rpc_call = median_call([&](std::promise<void>& got) {
      w->status([&](result<net::worker_status>) { got.set_value(); });
    });
  }
  if (!trace_path.empty()) {
    std::vector<std::pair<int64_t, run_metadata>> traced(21);
    for (auto& [span, md] : traced) {
      throw_if_error(s.run(feeds, {y}, {}, run_options{.trace = true}, &md).error());
      for (auto& n : md.nodes)
        span = std::max(span, n.end_ns);
    }
    std::sort(traced.begin(), traced.end(),
              [](auto& a, auto& b) { return a.first < b.first; });
    write_trace(traced[traced.size() / 2].second, trace_path);
  }
  s.close();
  ::kill(child, SIGTERM);
  ::waitpid(child, nullptr, 0);
  return out;
}

struct mlp {
  graph g;
  output x, y, loss;
  operation train, init;
  std::unique_ptr<adam_optimizer> adam;
  std::unique_ptr<sync_replicas_optimizer> sync;
  /// `sync`: synchronous replicas (one worker aggregating its own gradients each step).
  explicit mlp(bool distributed, bool synchronous = false) {
    std::optional<graph::scope_guard> d;
    if (distributed)
      d.emplace(g.device(replica_device_setter(1, "/job:worker/task:0")));
    g.set_seed(1);
    x = placeholder(g, dtype::f32, {100, 784}, "x");
    y = placeholder(g, dtype::i32, {100}, "y");
    auto w1 = variable(g, truncated_normal(g, {784, 512}, 0.05), "w1");
    auto b1 = variable(g, zeros(g, dtype::f32, {512}), "b1");
    auto w2 = variable(g, truncated_normal(g, {512, 10}, 0.05), "w2");
    auto b2 = variable(g, zeros(g, dtype::f32, {10}), "b2");
    auto h = relu(bias_add(matmul(x, w1.value), b1.value));
    auto logits = bias_add(matmul(h, w2.value), b2.value);
    loss = mean(sparse_softmax_cross_entropy_with_logits(logits, y).first);
    adam = std::make_unique<adam_optimizer>(0.001);
    if (synchronous) {
      auto step = variable(g, constant(g, int64_t(0)), "global_step", false);
      sync = std::make_unique<sync_replicas_optimizer>(
          *adam, sync_replicas_options{.replicas_to_aggregate = 1, .total_num_replicas = 1});
      train = sync->minimize(loss, step);
    } else {
      train = adam->minimize(loss);
    }
    init = global_variables_initializer(g);
  }
};

pid_t ps_pid = 0; // the ps process of ps_training, while it runs

/// A fixed batch of 100 images and labels for `m`.
feed_list batch_of(mlp& m) {
  tensor xv(dtype::f32, shape{100, 784}), yv(dtype::i32, shape{100});
  for (int64_t i = 0; i < xv.num_elements(); ++i)
    xv.data<float>()[i] = float((i * 37) % 255) / 255.f;
  for (int i = 0; i < 100; ++i)
    yv.data<int32_t>()[i] = i % 10;
  return {{m.x, xv}, {m.y, yv}};
}

/// Initializes `m` and runs 20 warm-up steps.
void warm_up(session& s, mlp& m) {
  feed_list feeds = batch_of(m);
  throw_if_error(s.run({m.init}));
  for (int i = 0; i < 20; ++i)
    throw_if_error(s.run(feeds, {m.loss}, {m.train}).error());
}

/// What one block of training steps measured: examples per second, and the CPU time per step of
/// this process and of the ps process (spinning threads included).
struct block_figures {
  double rate = 0, cpu_ms = 0, ps_cpu_ms = 0;
};

/// `steps` training steps of `m` on `s`, one after another (`depth` 1) or with `depth` in flight
/// (run_async: the next steps' parameters are pulled while the oldest finishes).
block_figures run_block(session& s, mlp& m, int steps, int depth = 1) {
  feed_list feeds = batch_of(m);
  double cpu0 = cpu_seconds(0), ps0 = ps_pid ? cpu_seconds(ps_pid) : 0, t0 = now();
  std::deque<std::future<result<std::vector<tensor>>>> inflight;
  for (int i = 0; i < steps; ++i) {
    if (depth == 1) { // as a training loop runs its steps
      throw_if_error(s.run(feeds, {m.loss}, {m.train}).error());
      continue;
    }
    if (int(inflight.size()) == depth) {
      throw_if_error(inflight.front().get().error());
      inflight.pop_front();
    }
    inflight.push_back(s.run_async(feeds, {m.loss}, {m.train}));
  }
  for (auto& f : inflight)
    throw_if_error(f.get().error());
  block_figures b;
  b.rate = 100.0 * steps / (now() - t0);
  b.cpu_ms = (cpu_seconds(0) - cpu0) / steps * 1e3;
  b.ps_cpu_ms = ps_pid ? (cpu_seconds(ps_pid) - ps0) / steps * 1e3 : 0.0;
  return b;
}

/// The median of `v` (the upper one of an even count) and its range.
struct spread {
  double median = 0, low = 0, high = 0;
  explicit spread(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    median = v[v.size() / 2], low = v.front(), high = v.back();
  }
};

/// Writes one traced step of `m` on `s` as a Chrome trace to `path`, and prints where the
/// step's time went per track.
void write_step_trace(session& s, mlp& m, const std::string& path) {
  run_metadata md;
  throw_if_error(
      s.run(batch_of(m), {m.loss}, {m.train}, run_options{.trace = true}, &md).error());
  write_trace(md, path);
  std::map<std::string, std::pair<int64_t, int64_t>> busy; // device -> (busy ns, last end)
  int64_t span = 0;
  for (auto& n : md.nodes) {
    busy[n.device].first += n.end_ns - n.start_ns;
    span = std::max(span, n.end_ns);
  }
  std::printf("cluster_bench: traced step, %zu nodes, %.2f ms -> %s\n", md.nodes.size(),
              double(span) / 1e6, path.c_str());
  for (auto& [device, b] : busy)
    std::printf("cluster_bench:   %-48s busy %.2f ms\n", device.c_str(), double(b.first) / 1e6);
}

void ps_training(const std::string& node_binary, const std::string& trace_dir) {
  // The data plane's bandwidth for the bound below, measured first: it forks, so no runtime's
  // threads may exist yet.
  double bandwidth = double(tensor_bytes) / data_plane(reps);
  // The serial limit: a synchronous step pulls every parameter before its forward pass and pushes
  // every gradient after its backward pass, and the 784x512 layer is both the first needed and
  // the last computed, so nothing overlaps: the local step plus raw TCP moving the parameters
  // out and the gradients back between two processes of this machine (wall and CPU time).
  constexpr size_t param_bytes = (784 * 512 + 512 + 512 * 10 + 10) * sizeof(float);
  exchange_limit exchange = raw_exchange(param_bytes, 300);
  int ps_port, worker_port;
  {
    int a = listen_any(ps_port), b = listen_any(worker_port);
    ::close(a);
    ::close(b);
  }
  std::string cluster = "ps=127.0.0.1:" + std::to_string(ps_port) +
                        ";worker=127.0.0.1:" + std::to_string(worker_port);
  pid_t child = ::fork();
  if (child == 0) {
    ::execl(node_binary.c_str(), node_binary.c_str(), "--cluster", cluster.c_str(), "--job", "ps",
            "--task", "0", static_cast<char*>(nullptr));
    _exit(127);
  }
  ps_pid = child;
  // The local session and the distributed one side by side, measured in interleaved rounds (a
  // local block, a distributed block, a pipelined one): this VM's speed drifts by a third between
  // minutes, so each round's ratio compares like with like, and the figures are the medians of
  // the rounds' ratios with their ranges.
  constexpr int rounds = 10, steps = 100;
  std::vector<double> rate_x, cpu_x, prefetch_x, bound_x, local_rates, local_cpus, remote_cpus,
      remote_ms, prefetch_rates, bound_mss, serial_x, serial_cpu_x;
  double bytes_per_step = 0, worker_cpu = 0, ps_cpu = 0, steps_run = 1;
  cluster_node::frame_counts frames;
  {
    auto* rt = new runtime; // never destroyed: see tests/eval.hpp
    mlp lm(false);
    session ls(*rt, lm.g);
    warm_up(ls, lm);
    auto node = cluster_node::start({.cluster = cluster_spec::parse(cluster).value(),
                                     .job = "worker",
                                     .task = 0,
                                     .log = [](const std::string&, const std::string&) {}})
                    .value();
    mlp m(true);
    session s(node->rt(), m.g, "runnel://127.0.0.1:" + std::to_string(worker_port));
    warm_up(s, m);
    for (int r = 0; r < rounds; ++r) {
      block_figures local = run_block(ls, lm, steps);
      uint64_t before = node->bytes_sent() + node->bytes_received();
      block_figures remote = run_block(s, m, steps);
      bytes_per_step = double(node->bytes_sent() + node->bytes_received() - before) / double(steps);
      block_figures pipelined = run_block(s, m, steps, 2);
      // The bound: the local step, or the step's bytes at the data plane's bandwidth (measured
      // above, 64 MiB one way; loopback, so both processes' copies share this machine's cores).
      double bound_ms = std::max(100.0 / local.rate, bytes_per_step / bandwidth) * 1e3;
      rate_x.push_back(remote.rate / local.rate);
      prefetch_x.push_back(pipelined.rate / local.rate);
      bound_x.push_back(100.0 / remote.rate * 1e3 / bound_ms);
      cpu_x.push_back((remote.cpu_ms + remote.ps_cpu_ms) / local.cpu_ms);
      serial_x.push_back(100.0 / remote.rate / (100.0 / local.rate + exchange.seconds));
      serial_cpu_x.push_back((remote.cpu_ms + remote.ps_cpu_ms) /
                             (local.cpu_ms + exchange.cpu_seconds * 1e3));
      local_rates.push_back(local.rate);
      remote_ms.push_back(100.0 / remote.rate * 1e3);
      prefetch_rates.push_back(pipelined.rate);
      bound_mss.push_back(bound_ms);
      local_cpus.push_back(local.cpu_ms);
      remote_cpus.push_back(remote.cpu_ms + remote.ps_cpu_ms);
      worker_cpu += remote.cpu_ms / rounds, ps_cpu += remote.ps_cpu_ms / rounds;
    }
    frames = node->frames_sent();
    steps_run = double(2 * rounds * steps + 20);
    if (!trace_dir.empty())
      write_step_trace(s, m, trace_dir + "/ps_training_step.json");
    s.close();
    if (!trace_dir.empty()) { // and a synchronous step of the same model
      mlp ms(true, true);
      session ss(node->rt(), ms.g, "runnel://127.0.0.1:" + std::to_string(worker_port));
      warm_up(ss, ms);
      write_step_trace(ss, ms, trace_dir + "/ps_training_sync_step.json");
      ss.close();
    }
  }
  ::kill(child, SIGTERM);
  ::waitpid(child, nullptr, 0);
  std::printf("cluster_bench: the worker sent %.1f frames a step, %.2f of them by shared memory; "
              "%.2f a step found the ring full\n",
              double(frames.sent) / steps_run, double(frames.by_shared_memory) / steps_run,
              double(frames.ring_full) / steps_run);
  spread rate(rate_x), bound(bound_x), prefetch(prefetch_x), cpu(cpu_x), local(local_rates),
      local_cpu(local_cpus), remote_cpu(remote_cpus), step_ms(remote_ms), bound_at(bound_mss),
      prefetch_rate(prefetch_rates), serial(serial_x), serial_cpu(serial_cpu_x);
  std::printf("bench ps_training: %.0f examples/s with 1 ps + 1 worker process (%.2fx the local "
              "session's %.0f examples/s; median of %d interleaved rounds, %.2f-%.2fx; target "
              "0.85x)\n",
              100.0 / step_ms.median * 1e3, rate.median, local.median, rounds, rate.low, rate.high);
  std::printf("bench ps_training_bound: %.2f ms/step (%.2fx the bound %.2f ms = max(local step "
              "%.2f ms, %.2f MB per step / %.2f GB/s data plane = %.2f ms); %.2f-%.2fx; target "
              "1.3x)\n",
              step_ms.median, bound.median, bound_at.median, 100.0 / local.median * 1e3,
              bytes_per_step / 1e6, bandwidth / 1e9, bytes_per_step / bandwidth * 1e3, bound.low,
              bound.high);
  std::printf("bench ps_training_prefetch: %.0f examples/s with 2 steps in flight, each pulling "
              "its parameters while the other finishes (%.2fx the local session; %.2f-%.2fx; "
              "staleness <= 1 step of this worker's own; target 1.0x)\n",
              prefetch_rate.median, prefetch.median, prefetch.low, prefetch.high);
  std::printf("bench ps_training_cpu: %.2f ms of CPU per step with 1 ps + 1 worker (worker %.2f, "
              "ps %.2f; threads that spin included) (%.2fx the local session's %.2f ms; "
              "%.2f-%.2fx; target 1.2x)\n",
              remote_cpu.median, worker_cpu, ps_cpu, cpu.median, local_cpu.median, cpu.low,
              cpu.high);
  std::printf("bench ps_training_serial_limit: %.2f ms/step (%.2fx the limit %.2f ms = local step "
              "%.2f ms + raw TCP moving %.2f MB out and back %.2f ms; %.2f-%.2fx; 0.85x the local "
              "session needs the exchange under %.2f ms)\n",
              step_ms.median, serial.median, 100.0 / local.median * 1e3 + exchange.seconds * 1e3,
              100.0 / local.median * 1e3, double(param_bytes) / 1e6, exchange.seconds * 1e3,
              serial.low, serial.high, 100.0 / local.median * 1e3 * (1 / 0.85 - 1));
  std::printf("bench ps_training_cpu_limit: %.2f ms of CPU per step (%.2fx the limit %.2f ms = "
              "the local session's %.2f ms + raw TCP's %.2f ms for the exchange; %.2f-%.2fx)\n",
              remote_cpu.median, serial_cpu.median, local_cpu.median + exchange.cpu_seconds * 1e3,
              local_cpu.median, exchange.cpu_seconds * 1e3, serial_cpu.low, serial_cpu.high);
}

void sparse_ps_update(const std::string& node_binary) {
  int ports[3];
  {
    int fds[3];
    for (int i = 0; i < 3; ++i)
      fds[i] = listen_any(ports[i]);
    for (int fd : fds)
      ::close(fd);
  }
  std::string cluster = "ps=127.0.0.1:" + std::to_string(ports[0]) + ",127.0.0.1:" +
                        std::to_string(ports[1]) + ";worker=127.0.0.1:" + std::to_string(ports[2]);
  pid_t children[2];
  for (int t = 0; t < 2; ++t) {
    children[t] = ::fork();
    if (children[t] == 0) {
      std::string task = std::to_string(t);
      ::execl(node_binary.c_str(), node_binary.c_str(), "--cluster", cluster.c_str(), "--job",
              "ps", "--task", task.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  const int64_t rows = 1'000'000, dim = 64, touched = 1000;
  double per_step = 0;
  {
    auto node = cluster_node::start({.cluster = cluster_spec::parse(cluster).value(),
                                     .job = "worker",
                                     .task = 0,
                                     .log = [](const std::string&, const std::string&) {}})
                    .value();
    graph g;
    auto d = g.device(replica_device_setter(2, "/job:worker/task:0"));
    auto table = partitioned_variable(
        g, "bench_sparse_table", {rows, dim},
        [&](const shape& s) { return zeros(g, dtype::f32, s); },
        fixed_size_partitioner(2));
    auto ids = placeholder(g, dtype::i64, shape{touched}, "ids");
    auto loss = sum(embedding_lookup(table, ids));
    auto train = gradient_descent_optimizer(0.1).minimize(loss);
    auto init = global_variables_initializer(g);
    session s(node->rt(), g, "runnel://127.0.0.1:" + std::to_string(ports[2]));
    throw_if_error(s.run({init}));
    std::vector<int64_t> batch(static_cast<size_t>(touched));
    auto feed = [&](int step) {
      for (int64_t i = 0; i < touched; ++i) // distinct ids, spread over the table
        batch[size_t(i)] = (i * 999'983 + int64_t(step) * 7919) % rows;
      return feed_list{{ids, tensor::vector<int64_t>(batch)}};
    };
    throw_if_error(s.run(feed(0), {}, {train}).error()); // registers the partitions
    const int steps = 20;
    uint64_t before = node->bytes_sent() + node->bytes_received();
    for (int step = 1; step <= steps; ++step)
      throw_if_error(s.run(feed(step), {}, {train}).error());
    per_step = double(node->bytes_sent() + node->bytes_received() - before) / steps;
    s.close();
  }
  for (pid_t c : children) {
    ::kill(c, SIGTERM);
    ::waitpid(c, nullptr, 0);
  }
  double rows_both_ways = 2.0 * double(touched * dim * 4);
  std::printf("bench sparse_ps_update: %.0f bytes on the wire per step, 1M x 64 table on 2 ps, "
              "%lld rows touched (%.2fx the touched rows moved once each way, %.0f bytes; "
              "target 1.2x)\n",
              per_step, static_cast<long long>(touched), per_step / rows_both_ways,
              rows_both_ways);
}

} // namespace

int main(int argc, char** argv) {
  runnel::reexec_with_better_blas_core(argv); // OpenBLAS's own kernels, not its generic ones
  // Arguments: [--only NAME] [--trace-dir DIR] [NODE_BINARY]; NAME is one benchmark (e.g.
  // remote_step); DIR gets Chrome traces of distributed ps_training steps and of a remote step.
  std::string node_binary = RUNNEL_NODE_BINARY, only, trace_dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--trace-dir" && i + 1 < argc)
      trace_dir = argv[++i];
    else if (a == "--help" || a == "-h") {
      std::printf("usage: cluster_bench [--only NAME] [--trace-dir DIR] [NODE_BINARY]\n"
                  "  NAME: one benchmark (remote_tensor_64mib, ps_training, sparse_ps_update,\n"
                  "  remote_step, ...); DIR: Chrome traces of ps_training and remote steps;\n"
                  "  NODE_BINARY: runnel-node (default %s)\n",
                  RUNNEL_NODE_BINARY);
      return 0;
    } else if (a.rfind("-", 0) == 0) {
      std::fprintf(stderr, "cluster_bench: unknown option %s (--help lists them)\n", a.c_str());
      return 2;
    } else
      node_binary = a;
  }
  if (::access(node_binary.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "cluster_bench: %s is not an executable runnel-node: %s\n",
                 node_binary.c_str(), std::strerror(errno));
    return 2;
  }
  auto wanted = [&](const char* name) { return only.empty() || only == name; };
  std::printf("cluster_bench: %s\n", runnel::bench::cpu_description().c_str());
  ::signal(SIGPIPE, SIG_IGN);
  if (wanted("remote_tensor_64mib")) {
    double raw = raw_tcp(tensor_bytes, reps);
    double ours = data_plane(reps);
    double raw_gbs = double(tensor_bytes) / raw / 1e9, ours_gbs = double(tensor_bytes) / ours / 1e9;
    std::printf("bench remote_tensor_64mib: %.3g GB/s (%.2fx raw TCP loopback %.3g GB/s between "
                "the same processes; target 0.85x)\n",
                ours_gbs, ours_gbs / raw_gbs, raw_gbs);
    std::fflush(stdout);
  }
  if (wanted("remote_tensor_exchange")) {
    // ps_training's parameters out and back, alone: the thread that sends writing a ring
    // frame itself, against the event loop writing it, in alternating rounds.
    constexpr size_t bytes = 784 * 512 * sizeof(float);
    exchange_limit raw = raw_exchange(bytes, 300);
    std::vector<double> direct, loop;
    for (int round = 0; round < 5; ++round) {
      direct.push_back(data_plane_exchange(bytes, 200, true));
      loop.push_back(data_plane_exchange(bytes, 200, false));
    }
    std::sort(direct.begin(), direct.end());
    std::sort(loop.begin(), loop.end());
    std::printf("bench remote_tensor_exchange: %.0f us for %.2f MB out and back between two "
                "processes (%.2fx raw TCP moving the same bytes, %.0f us; the event loop "
                "writing every frame: %.0f us = %.2fx; medians of 5 alternating rounds)\n",
                direct[2] * 1e6, double(bytes) / 1e6, direct[2] / raw.seconds, raw.seconds * 1e6,
                loop[2] * 1e6, loop[2] / raw.seconds);
    std::fflush(stdout);
  }
  if (wanted("ps_training")) {
    ps_training(node_binary, trace_dir);
    std::fflush(stdout);
  }
  if (wanted("sparse_ps_update")) {
    sparse_ps_update(node_binary);
    std::fflush(stdout);
  }
  if (wanted("remote_step")) {
    // Idle, then with one core kept busy by a spinning process: an idle VM's cores wake slowly
    // (~50 us), which makes the raw round trip slow and the ratio flattering; busy, the round
    // trip is a few context switches and every hand-off of the step shows.
    for (bool busy : {false, true}) {
      pid_t spinner = busy ? ::fork() : -1;
      if (spinner == 0) {
        volatile uint64_t spins = 0;
        for (;;)
          spins = spins + 1;
      }
      double rtt = raw_round_trip(2000);
      auto f = remote_step(node_binary, 2000,
                           busy && !trace_dir.empty() ? trace_dir + "/remote_step_busy.json" : "");
      if (busy) {
        ::kill(spinner, SIGKILL);
        ::waitpid(spinner, nullptr, 0);
      }
      const char* suffix = busy ? "_busy" : "";
      const char* state = busy ? ", both with one core kept busy" : "";
      std::printf("bench remote_step%s: %.3g us median (%.2fx a raw TCP round trip of %.3g us%s; "
                  "target %dx)\n",
                  suffix, f.step * 1e6, f.step / rtt, rtt * 1e6, state, busy ? 4 : 3);
      std::printf("bench remote_control_call%s: %.3g us median for a bare step-connection call "
                  "(a heartbeat) to the same node (%.2fx the raw round trip%s; target 2x)\n",
                  suffix, f.control_call * 1e6, f.control_call / rtt, state);
      std::printf("bench remote_rpc_call%s: %.3g us median for a bare Cap'n Proto RPC (getStatus) "
                  "to the same node (%.2fx the raw round trip%s)\n",
                  suffix, f.rpc_call * 1e6, f.rpc_call / rtt, state);
      std::printf("bench remote_step_client_master%s: %.3g us median with a master in the client "
                  "process (%.2fx the raw round trip%s; target %dx)\n",
                  suffix, f.client_master_step * 1e6, f.client_master_step / rtt, state,
                  busy ? 4 : 3);
      std::fflush(stdout);
    }
  }
  return 0;
}
