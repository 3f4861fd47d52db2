// Synchronous data-parallel training of a synthetic model with ResNet-50's variables and emulated
// compute (apps/train/scaling/synthetic_model.hpp): what bench/scaling_bench.sh runs on 1-8
// simulated hosts, and what the cost model (placement/data_parallel.hpp) predicts.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <thread>

#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/apps/support/app_support.hpp"
#include "runnel/apps/train/scaling/synthetic_model.hpp"
#include "runnel/ops/core/atomic_file.hpp"

using namespace runnel;
using namespace runnel::apps;

namespace {

const char* usage =
    "usage: scaling [options]\n"
    "Trains a synthetic model synchronously: ResNet-50's variables (output channels divided by\n"
    "--scale) cut into pieces spread over the ps tasks, and layers that hold the worker's device\n"
    "for an emulated compute time instead of computing. The wire carries the real bytes and the\n"
    "ps tasks really sum and apply them, so a cluster's step time is its protocol's and links'.\n"
    "  --scale S             output channels divided by S (default 16: 1.6 M parameters, 6.4 MB)\n"
    "  --piece-kib K         largest variable piece in KiB (default 4096 / S, BytePS's 4 MB\n"
    "                        scaled with the model)\n"
    "  --compute-ms T        emulated forward + backward time of one step (default 100)\n"
    "  --batch N             examples per worker per step, for the rate reported (default 32)\n"
    "  --steps N             timed steps (default 30), after --warmup N steps (default 5)\n"
    "  --lr X                SGD learning rate (default 0.5)\n"
    "  --replicas R          local run: average R replicas' gradients each step, as R\n"
    "                        synchronous workers do (default 1)\n"
    "  --params-out FILE     after training, every parameter piece as raw float32, in order\n"
    "  --trace FILE          trace the middle timed step (Chrome trace JSON). In a cluster every\n"
    "                        worker traces it to FILE with -worker-I before the extension, and\n"
    "                        the chief its sync loop's step to FILE with -chief-step (put them\n"
    "                        side by side: scripts/lib/sync_timeline.py)\n"
    "  --describe            print the layers, pieces and shards, and exit\n"
    "  --predict N,N,...     print the cost model's step for N workers each (a ps shard on every\n"
    "                        worker's host unless --ps-hosts K) and exit; with --link-mbit R\n"
    "                        (default 1000), --overhead-ms X (the fixed part of a step, measured\n"
    "                        on one worker), --message-us X (default 50), --machine-mbytes X\n"
    "                        (MB/s the emulating machine moves between all its simulated\n"
    "                        hosts; default: real hosts, no such limit)\n"
    "Distributed (every worker task trains; worker 0 is the chief):\n"
    "  --cluster SPEC        e.g. \"ps=10.0.0.1:2222,10.0.0.2:2222;worker=10.0.0.1:2223,...\"\n"
    "  --job ps|worker --task I\n"
    "  --auth-token-file F   the cluster's shared secret (needed off loopback)\n"
    "  --sync-timeout S      fail a step that waits longer than S seconds (default 60)\n";

std::vector<int> parse_counts(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    out.push_back(std::stoi(item));
  if (out.empty())
    throw error(invalid_argument("--predict takes worker counts, e.g. 1,2,4,8"));
  return out;
}

synthetic_options model_options(const flags& f) {
  synthetic_options o;
  o.scale = int(f.get_int("scale", 16).value());
  o.piece_bytes = f.get_int("piece-kib", std::max(1, 4096 / std::max(1, o.scale))).value() * 1024;
  o.compute_s = f.get_double("compute-ms", 100).value() / 1e3;
  o.lr = f.get_double("lr", 0.5).value();
  o.replicas = int(f.get_int("replicas", 1).value());
  if (o.piece_bytes <= 0 || !(o.compute_s >= 0))
    throw error(invalid_argument("--piece-kib must be positive and --compute-ms at least 0"));
  return o;
}

int describe(const flags& f) {
  auto o = model_options(f);
  o.ps_tasks = int(f.get_int("ps-tasks", 1).value());
  auto m = build_synthetic(o);
  std::vector<double> per_shard(size_t(std::max(1, o.ps_tasks)), 0);
  size_t pieces = 0;
  for (auto& l : m->costs) {
    double bytes = 0;
    for (auto& p : l.pieces) {
      bytes += p.bytes;
      per_shard[size_t(p.shard)] += p.bytes;
    }
    pieces += l.pieces.size();
    std::printf("%-28s %3zu pieces %9.0f bytes  forward %.3f ms  backward %.3f ms\n",
                l.name.c_str(), l.pieces.size(), bytes, l.forward_s * 1e3, l.backward_s * 1e3);
  }
  std::printf("%zu layers, %zu pieces, %.2f MB of parameters\n", m->costs.size(), pieces,
              double(m->parameter_bytes) / 1e6);
  for (size_t k = 0; k < per_shard.size(); ++k)
    std::printf("ps task %zu: %.2f MB\n", k, per_shard[k] / 1e6);
  return 0;
}

int predict(const flags& f) {
  auto counts = parse_counts(f.get("predict", ""));
  double batch = double(f.get_int("batch", 32).value());
  int ps_hosts = int(f.get_int("ps-hosts", 0).value());
  std::optional<double> single;
  for (int n : counts) {
    auto o = model_options(f);
    o.ps_tasks = ps_hosts > 0 ? ps_hosts : n;
    o.task = 0;
    auto m = build_synthetic(o);
    data_parallel_model dp{.layers = m->costs,
                           .workers = n,
                           .shards = o.ps_tasks,
                           .colocated = ps_hosts == 0,
                           .link_bytes_per_s = f.get_double("link-mbit", 1000).value() * 1e6 / 8,
                           .machine_bytes_per_s = f.get_double("machine-mbytes", 0).value() * 1e6,
                           .message_s = f.get_double("message-us", 50).value() / 1e6,
                           .step_overhead_s = f.get_double("overhead-ms", 0).value() / 1e3};
    auto p = predict_sync_step(dp);
    double rate = p.throughput(batch, n);
    if (!single)
      single = n == 1 ? rate : batch / (p.compute_s + dp.step_overhead_s);
    std::printf("predict %d workers: %.1f ex/s, efficiency %.3f, %s\n", n, rate,
                rate / (n * *single), p.explain().c_str());
  }
  return 0;
}

/// `path` with `suffix` before its extension: run.json -> run-worker-1.json.
std::string with_suffix(const std::string& path, const std::string& suffix) {
  auto slash = path.rfind('/');
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  auto dot = path.rfind('.');
  if (dot == std::string::npos || dot <= base) // no extension, or a name like ".trace"
    return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

/// The machine's CPU time so far (/proc/stat's first line, in clock ticks): busy and all. On
/// simulated hosts every task shares these cores, so this is what the whole cluster used.
struct cpu_ticks {
  double busy = 0, total = 0;
};
cpu_ticks machine_cpu() {
  std::ifstream in("/proc/stat");
  std::string label;
  cpu_ticks t;
  if (!(in >> label) || label != "cpu")
    return t;
  double v;
  for (int i = 0; i < 10 && in >> v; ++i) {
    t.total += v;
    if (i != 3 && i != 4) // idle, iowait
      t.busy += v;
  }
  return t;
}

/// Seconds since `t0`.
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// This process's place: a local run (no node), or a task of --cluster with its node started.
struct place {
  std::unique_ptr<cluster_node> node;
  int workers = 1, task = 0;
  std::string target; ///< the session's: this worker's master
  session_options so;
  bool served_parameters = false; ///< a ps task that served until a signal
};

/// Starts this task's node on --cluster (a ps task serves until stopped) and sets the model's
/// cluster options; with --trace, names this worker's trace file and the chief's.
place join_cluster(const flags& f, synthetic_options& o, std::string& trace_file, int64_t traced) {
  place p;
  if (!f.has("cluster"))
    return p;
  auto spec = cluster_spec::parse(f.get("cluster", "")).value();
  std::string job = f.get("job", "worker");
  p.task = int(f.get_int("task", 0).value());
  p.workers = spec.num_tasks("worker");
  o.ps_tasks = spec.num_tasks("ps");
  if (o.ps_tasks == 0 || p.workers == 0)
    throw error(invalid_argument("--cluster needs a 'ps' job and a 'worker' job"));
  if (o.replicas != 1)
    throw error(invalid_argument("--replicas is for a local run: a cluster's replicas are its "
                                 "workers"));
  if (f.has("auth-token-file"))
    p.so.auth_token = read_token(f.get("auth-token-file", "")).value();
  if (!trace_file.empty() && job == "worker") {
    // The chief's sync loop traces the step that ends the workers' traced one
    // (actors/cluster/sync_runner.cpp); each worker its own file. Set before any thread starts.
    if (p.task == 0)
      ::setenv("RUNNEL_SYNC_TRACE",
               (with_suffix(trace_file, "-chief-step") + "@" + std::to_string(traced)).c_str(), 1);
    trace_file = with_suffix(trace_file, "-worker-" + std::to_string(p.task));
  }
  p.node = cluster_node::start(
               {.cluster = spec, .job = job, .task = p.task, .auth_token = p.so.auth_token})
               .value();
  if (job == "ps") {
    serve_until_signal(p.task);
    p.served_parameters = true;
    return p;
  }
  if (job != "worker" || p.task < 0 || p.task >= p.workers)
    throw error(invalid_argument("--job must be ps or worker and --task one of the job's "
                                 "tasks, got " +
                                 job + " " + std::to_string(p.task)));
  double timeout_s = f.get_double("sync-timeout", 60).value();
  o.task = p.task;
  o.sync = sync_replicas_options{.replicas_to_aggregate = p.workers,
                                 .total_num_replicas = p.workers,
                                 .replica = p.task,
                                 .timeout_ms = int64_t(timeout_s * 1000),
                                 .worker_device = "/job:worker/task:" + std::to_string(p.task)};
  p.target = "runnel://" + spec.address("worker", p.task).value();
  return p;
}

/// A worker other than the chief waits (up to 300 s) until the chief has initialized the model.
void wait_for_chief(session& s, const synthetic_model& m, int task) {
  std::fprintf(stderr, "worker %d: waiting for the chief to initialize the model ...\n", task);
  auto waited = std::chrono::steady_clock::now();
  for (;;) {
    auto r = s.run({}, m.ready);
    if (r.ok())
      return;
    if (r.error().code() != error_code::failed_precondition &&
        r.error().code() != error_code::unavailable)
      throw error(r.error());
    if (since(waited) > 300)
      throw error(deadline_exceeded("worker " + std::to_string(task) +
                                    ": the chief did not initialize the model in 300 s"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

/// The lines bench/scaling_bench.sh reads: step times and throughput, the machine's CPU use.
void report(std::vector<double> times, const cpu_ticks& cpu_from, const cpu_ticks& cpu_to,
            int replicas, int64_t batch) {
  double mean = std::accumulate(times.begin(), times.end(), 0.0) / double(times.size());
  std::sort(times.begin(), times.end());
  std::printf("scaling: %d workers, %zu steps, step %.2f ms mean (median %.2f, min %.2f, max "
              "%.2f), %.1f examples/s\n",
              replicas, times.size(), mean * 1e3, times[times.size() / 2] * 1e3,
              times.front() * 1e3, times.back() * 1e3, double(batch * replicas) / mean);
  if (double total = cpu_to.total - cpu_from.total; total > 0) {
    int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    double busy = (cpu_to.busy - cpu_from.busy) / total;
    std::printf("scaling: machine CPU %.2f of %d cores busy during the timed steps (%.0f%%): "
                "%.0f ms of CPU a step\n",
                busy * cores, cores, busy * 100, busy * cores * mean * 1e3);
  }
}

int run(const flags& f) {
  if (f.has("describe"))
    return describe(f);
  if (f.has("predict"))
    return predict(f);
  auto o = model_options(f);
  int64_t batch = f.get_int("batch", 32).value();
  int64_t steps = f.get_int("steps", 30).value(), warmup = f.get_int("warmup", 5).value();
  if (steps < 1 || warmup < 0 || batch < 1)
    throw error(invalid_argument("--steps and --batch must be at least 1, --warmup at least 0"));
  std::string trace_file = f.get("trace", "");
  int64_t traced = warmup + steps / 2;
  place p = join_cluster(f, o, trace_file, traced);
  if (p.served_parameters)
    return 0;
  auto& [node, workers, task, target, so, served] = p;
  std::optional<runtime> local_rt;
  if (!node)
    local_rt.emplace();
  runtime& rt = node ? node->rt() : *local_rt;
  auto m = build_synthetic(o);
  bool chief = task == 0;
  std::fprintf(stderr,
               "worker %d of %d: %zu layers, %zu parameter pieces, %.2f MB, %lld examples a step "
               "each, %.1f ms emulated compute a step\n",
               task, workers, m->costs.size(), m->parameters.size(),
               double(m->parameter_bytes) / 1e6, static_cast<long long>(batch), o.compute_s * 1e3);
  auto s_ptr = target.empty() ? std::make_unique<session>(rt, m->g)
                              : std::make_unique<session>(rt, m->g, target, so);
  session& s = *s_ptr;
  if (chief)
    throw_if_error(s.run({global_variables_initializer(m->g)}));
  else
    wait_for_chief(s, *m, task);
  std::vector<double> times;
  cpu_ticks cpu_from;
  auto started = std::chrono::steady_clock::now();
  auto last_report = started;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    feed_list feeds;
    for (size_t r = 0; r < m->inputs.size(); ++r)
      feeds.emplace_back(
          m->inputs[r],
          tensor::vector<float>({synthetic_model::input_value(i, o.sync ? task : int(r))}));
    if (i == warmup)
      cpu_from = machine_cpu();
    auto t0 = std::chrono::steady_clock::now();
    bool trace = !trace_file.empty() && i == traced;
    run_metadata md;
    auto out = trace ? s.run(feeds, {}, {m->train}, run_options{.trace = true}, &md)
                     : s.run(feeds, {}, {m->train});
    if (!out)
      throw error(out.error());
    if (i >= warmup)
      times.push_back(since(t0));
    if (trace)
      throw_if_error(write_file_atomically(trace_file, md.to_chrome_trace()));
    if (since(last_report) > 1 || i + 1 == warmup + steps) {
      last_report = std::chrono::steady_clock::now();
      double mean = times.empty()
                        ? 0
                        : std::accumulate(times.begin(), times.end(), 0.0) / double(times.size());
      std::fprintf(stderr, "worker %d: step %lld/%lld  %.1f ms a step%s\n", task,
                   static_cast<long long>(i + 1), static_cast<long long>(warmup + steps),
                   mean * 1e3, times.empty() ? " (warming up)" : "");
    }
  }
  report(times, cpu_from, machine_cpu(), o.sync ? workers : o.replicas, batch);
  if (f.has("params-out")) {
    auto values = s.run({}, m->parameters).value();
    std::string bytes;
    for (auto& v : values)
      bytes.append(reinterpret_cast<const char*>(v.data<float>()),
                   size_t(v.num_elements()) * sizeof(float));
    throw_if_error(write_file_atomically(f.get("params-out", ""), bytes));
  }
  if (m->sync && chief) // the others' next step would end with "training ended"
    throw_if_error(s.run({m->sync->ops().stop}));
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return app_main(
      "scaling", argc, argv, usage,
      {"scale",   "piece-kib", "compute-ms", "batch",           "steps",       "warmup",
       "lr",      "replicas",  "params-out", "trace",           "describe",    "ps-tasks",
       "predict", "ps-hosts",  "link-mbit",  "overhead-ms",     "message-us",  "machine-mbytes",
       "cluster", "job",       "task",       "auth-token-file", "sync-timeout"},
      run);
}
