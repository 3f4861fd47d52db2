#pragma once
// Sessions run graphs on a runtime.
//
//   runtime rt;
//   graph g;
//   auto x = placeholder(g, dtype::f32, {-1, 2}, "x");
//   auto y = matmul(x, constant(g, {{1.f}, {2.f}}));
//   session s(rt, g);
//   auto out = s.run({{x, tensor::from_values<float>({1, 2}, {3, 4})}}, {y});
//   if (!out) std::cerr << out.error().to_string();   // errors name the node and op
//   std::cout << out.value()[0];                       // float32[1,1] [[11]]
//
// The first run of a (feeds, fetches, targets) signature prunes the graph to what it needs and
// instantiates it as node actors on the device actors; later runs reuse that instance. A node
// fires when all its inputs for a step have arrived. Several steps may be in flight (bounded by
// `max_in_flight_steps`); `run` may be called from many threads at once. A kernel error aborts
// only its step. The graph must outlive the session and must not change while `run` executes.

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runnel/actors/exec/runtime.hpp"
#include "runnel/ops/graph/graph.hpp"
#include "runnel/ops/optimize/graph_optimizer.hpp"

namespace runnel {

struct session_options {
  /// Steps of one signature that may run at once; further `run` calls wait.
  int max_in_flight_steps = 8;
  /// Relax a device spec no device satisfies (e.g. /device:GPU:0 on a CPU-only runtime) instead
  /// of failing; job, replica and task are never relaxed.
  bool allow_soft_placement = false;
  /// How unconstrained nodes are spread over the runtime's devices: the first feasible device
  /// (TensorFlow's policy, the default while devices share the scheduler's threads), or the
  /// greedy cost-model placer (placement/cost_model.hpp).
  enum class placement_policy { first_feasible, cost_model } placement =
      placement_policy::first_feasible;
  /// With `trace_placement`, each new instance's placement is explained on stderr.
  bool trace_placement = false;
  /// Node costs the cost-model placer reads, shared between sessions: traced runs record their
  /// measured node times here (learn_costs), so a later session placing the same graph uses real
  /// costs instead of estimates. Null: estimates only.
  std::shared_ptr<cost_model> costs;
  /// Remote sessions: the cluster's shared secret (empty: none), and how long a run may wait
  /// for the cluster before failing with `deadline_exceeded` (0: no limit).
  std::string auth_token;
  std::chrono::milliseconds remote_timeout{0};
  /// Remote sessions over TLS (a cluster whose nodes run with --tls-*): PEM files of this
  /// client's certificate and key, and the cluster's CA. All three or none.
  std::string tls_cert, tls_key, tls_ca;
  /// Remote sessions whose target is a node of this process (same address and credentials) call
  /// its master directly, without a connection; false: over the network, as from another process
  /// (docs/cluster.md, "How a step runs").
  bool in_process_master = true;
  /// Remote sessions: place, partition and drive steps in this process, with a master of its own
  /// for the cluster the target node was started with, calling each task's worker directly (a
  /// step is one round trip per task), instead of calling the target node's master. This
  /// process must reach every task; targets in this process still use their node's master
  /// while `in_process_master` holds.
  bool client_master = false;
  /// The graph optimization passes run on each signature's nodes before they are instantiated
  /// (ops/optimize/graph_optimizer.hpp); the environment variable RUNNEL_GRAPH_OPTIMIZER
  /// ("off", or "no-cse,...") overrides them. Graphs with loops or conditionals are not rewritten.
  graph_optimizer_options optimizer;
  /// Cheap nodes run in their producer's turn instead of by message (docs/architecture.md,
  /// "Execution"); false: every firing is a message (to measure what inline firing saves).
  bool inline_firing = true;
};

/// Lets another thread abort a step in flight (a cluster worker told by its master to clean a
/// step up): give it in run_options::cancellation, then cancel() — before the step starts or
/// while it runs — fails the step with `why`. Thread-safe; one step per object.
class step_cancellation {
public:
  void cancel(status why);
  /// The session's side: `abort` fails the step (at once if cancel() came first).
  void bind(std::function<void(status)> abort);

private:
  std::mutex mu_;
  std::function<void(status)> abort_;
  std::optional<status> why_;
};

struct run_options {
  /// Record when each node ran, where, and what it produced (run_metadata).
  bool trace = false;
  /// The step's id in the rendezvous (0: the runtime picks one). A cluster's master sets it, so
  /// that the partitions of one step on several processes pair their Sends and Recvs.
  int64_t step_id = 0;
  /// Abort the step with deadline_exceeded when it has not finished after this long (0: wait
  /// as long as it takes). Bounds a loop that never ends. On a cluster the master is asked to
  /// cancel it when it is the session's only step in flight from this process; otherwise it is
  /// left to finish there (cancelling is session-wide).
  std::chrono::milliseconds timeout{0};
  /// Asked every `interrupt_poll` while a step runs: true aborts the step with `cancelled`
  /// (Python's Ctrl-C); on a cluster, the master is asked to cancel the session's steps in
  /// flight. Unset: never asked.
  std::function<bool()> interrupted;
  std::chrono::milliseconds interrupt_poll{50};
  /// Set: cancel() on it aborts this step (local steps only).
  std::shared_ptr<step_cancellation> cancellation;
};

/// One node's run in a traced step.
struct node_trace {
  std::string node, op, device;
  int64_t start_ns = 0, end_ns = 0; ///< since the step started
  int64_t output_bytes = 0;
  /// In a while loop: the frame's name and the iteration (-1 and empty outside any loop).
  std::string frame;
  int64_t iteration = -1;
  /// CPU time the running thread spent on it: below end - start when the thread was preempted
  /// (other work on its core). -1 where not measured (asynchronous kernels, remote nodes).
  int64_t cpu_ns = -1;
};

/// What a traced run reports.
struct run_metadata {
  std::vector<node_trace> nodes; ///< in the order they finished
  /// When the step started on this process's steady clock (ns since its epoch): what the nodes'
  /// times count from. A step on a cluster counts from the client's send of the run.
  int64_t origin_ns = 0;
  /// Bytes of the outputs each device produced during the step (an upper bound on the step's
  /// peak memory there: buffers freed during the step are not subtracted).
  std::vector<std::pair<std::string, int64_t>> output_bytes_per_device;
  /// Peak bytes of live output buffers per device during the step: a node's outputs count from
  /// its start until its last consumer finishes (fetched ones until the step ends). Kernels'
  /// scratch space and buffers reused in place are not told apart, so this errs high, but it
  /// subtracts what the step frees.
  std::vector<std::pair<std::string, int64_t>> peak_bytes_per_device;
  /// Live output bytes per device over time (ns since the step started, bytes), one series per
  /// device in the order of peak_bytes_per_device; drawn as counter tracks in the Chrome trace.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> memory_timeline;
  /// Chrome's trace-event JSON (open in Perfetto or chrome://tracing): one track per device.
  std::string to_chrome_trace() const;
};

class cost_model;
class session;

/// Work done around a session's runs by whoever registered it, so that the session itself knows
/// no training policy: synchronous replicas set themselves up this way on the first run of their
/// train op (actors/cluster/sync_runner.hpp).
class session_hook {
public:
  virtual ~session_hook() = default;
  /// Called before every run of `s` with its targets; may run steps of its own through `s`.
  virtual status before_run(session& s, const std::vector<operation>& targets) = 0;
  /// Called when `s` closes, before its steps are waited for (end loops that run steps).
  virtual void stop() {}
};
/// What a new session on graph `g` gets from one registered provider (null: nothing).
using session_hook_factory = std::function<std::unique_ptr<session_hook>(const graph& g)>;
/// Registers a provider every session consults when it is made. Returns true, for use in a
/// static initialiser.
bool register_session_hook(session_hook_factory factory);
/// Records a traced run's node times in `costs` (by device type), so the cost-model placer uses
/// measured times for those nodes from then on.
void learn_costs(const run_metadata& metadata, cost_model& costs);

/// What a run feeds: a tensor for an output (usually a placeholder's).
using feed_list = std::vector<std::pair<output, tensor>>;
/// The same by name ("x" or "x:0").
using named_feed_list = std::vector<std::pair<std::string, tensor>>;

class session {
public:
  session(runtime& rt, const graph& g, session_options options = {});
  /// A session on a cluster: `target` is "runnel://host:port", a node whose master runs the
  /// graph over the cluster (actors/cluster/cluster.hpp). The same API as a local session; the graph is
  /// sent on the first run, and again when it has grown. A traced run (run_options::trace) records
  /// every task's nodes, on this process's clock (docs/cluster.md, "Traces").
  session(runtime& rt, const graph& g, const std::string& target, session_options options = {});
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  /// Runs one step: computes `fetches` (in order) and runs `targets`, with `feeds` replacing
  /// the values of the outputs they name.
  result<std::vector<tensor>> run(const feed_list& feeds, const std::vector<output>& fetches,
                                  const std::vector<operation>& targets = {});
  /// Runs targets only.
  status run(const std::vector<operation>& targets) {
    auto r = run({}, {}, targets);
    return r.error();
  }
  /// Runs one step as above; with `options.trace` fills `metadata` with per-node timings.
  result<std::vector<tensor>> run(const feed_list& feeds, const std::vector<output>& fetches,
                                  const std::vector<operation>& targets,
                                  const run_options& options, run_metadata* metadata);
  /// The same by tensor and node names.
  result<std::vector<tensor>> run(const named_feed_list& feeds,
                                  const std::vector<std::string>& fetches,
                                  const std::vector<std::string>& targets = {});
  /// Starts a step and returns at once; the future holds what `run` would return.
  std::future<result<std::vector<tensor>>> run_async(const feed_list& feeds,
                                                     const std::vector<output>& fetches,
                                                     const std::vector<operation>& targets = {});

  /// Starts a step and calls `done` with what `run` would return, from a runtime thread, when it
  /// finishes (or at once when it cannot start). `done` must not block.
  void run_callback(const feed_list& feeds, const std::vector<output>& fetches,
                    const std::vector<operation>& targets,
                    std::function<void(result<std::vector<tensor>>)> done);
  void run_callback(const feed_list& feeds, const std::vector<output>& fetches,
                    const std::vector<operation>& targets, const run_options& options,
                    std::function<void(result<std::vector<tensor>>)> done);
  /// As run_callback; with `options.trace`, `done` gets the step's node times too (the nodes and
  /// origin of run_metadata). Local sessions only.
  void run_callback_traced(const feed_list& feeds, const std::vector<output>& fetches,
                           const std::vector<operation>& targets, const run_options& options,
                           std::function<void(result<std::vector<tensor>>, run_metadata)> done);

  /// Waits for steps in flight, then stops every node actor. Later runs fail with `cancelled`.
  void close();
  bool closed() const;
  /// Executor instances built so far (one per distinct signature).
  size_t num_instances() const;

  struct impl;
  struct remote;
  /// The runtime's internals (for actors/ code that starts actors next to this session's).
  runtime::impl& runtime_internals() const;

private:
  /// Fills md's peak_bytes_per_device and memory_timeline from its node times and the graph.
  void fill_memory(run_metadata& md, const std::vector<output>& fetches) const;
  std::unique_ptr<impl> impl_;
  std::shared_ptr<remote> remote_; ///< set for sessions on a cluster
  /// Before each run and at close: the registered providers' hooks for this graph.
  std::vector<std::unique_ptr<session_hook>> hooks_;
  status run_hooks(const std::vector<operation>& targets);
};

/// Frames and per-iteration inputs that steps with control flow hold in this process now: 0 when
/// none is running (what a test of leaks counts).
int64_t control_flow_state_in_use();

} // namespace runnel
