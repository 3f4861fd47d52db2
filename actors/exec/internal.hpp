#pragma once
// Runtime internals shared by the actors/ sources: atoms, actor protocols, step state and the
// per-node setup. Includes CAF; never include it from a public header.
//
// Ownership: the runtime owns the actor system and device actors. A device actor owns its
// resources (variables, each served by a variable actor). A session's executor instance owns
// handles to its node actors and their setups; node actors hold handles only to their consumers
// (a DAG, so no cycles; in loops the links a producer fires inline by do not own). A step_state
// is shared by the caller and every message of that step.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "runnel/ops/gpu/accelerator.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "runnel/actors/exec/device_executor.hpp"
#include "runnel/actors/exec/providers.hpp"
#include "runnel/actors/exec/scheduler.hpp"
#include "runnel/actors/exec/rendezvous.hpp"
#include "runnel/actors/exec/runtime.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/kernel/kernel.hpp"
#include "runnel/ops/kernel/accumulator.hpp"
#include "runnel/ops/kernel/queue.hpp"
#include "runnel/ops/kernel/step_resources.hpp"
#include "runnel/ops/kernel/variable.hpp"

namespace runnel {

using input_atom = caf::atom_constant<caf::atom("input")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using abort_atom = caf::atom_constant<caf::atom("abort")>;
using resume_atom = caf::atom_constant<caf::atom("resume")>;
using update_atom = caf::atom_constant<caf::atom("update")>;
using spawn_atom = caf::atom_constant<caf::atom("spawnnodes")>;
using clear_atom = caf::atom_constant<caf::atom("clear")>;

struct step_state;
using step_ptr = std::shared_ptr<step_state>;
/// The CAF worker whose thread this is (null on other threads): the scheduler sets it when the
/// worker looks for its first job (runtime.cpp).
extern thread_local caf::execution_unit* worker_unit;
struct async_call;
using async_call_ptr = std::shared_ptr<async_call>;
struct update_request;
using update_request_ptr = std::shared_ptr<update_request>;
struct spawn_request;
using spawn_request_ptr = std::shared_ptr<spawn_request>;

struct frame_state;
class flow_state;
/// Where a value is in a step with control flow: its frame and iteration, and whether it is dead
/// (on a branch not taken). Graphs without control-flow ops never carry one.
struct flow_tag {
  frame_state* frame = nullptr;
  int64_t iter = 0;
  bool dead = false;
};

} // namespace runnel

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(runnel::flow_tag)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(runnel::tensor)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(runnel::step_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(runnel::async_call_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(runnel::update_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(runnel::spawn_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(runnel::status)

namespace runnel {

/// A node actor's protocol: inputs of a step, a start for source nodes, abort of a step, and the
/// completion of an asynchronous kernel.
using node_actor =
    caf::typed_actor<caf::reacts_to<input_atom, step_ptr, int32_t, tensor>,
                     caf::reacts_to<input_atom, step_ptr, int32_t, tensor, flow_tag>,
                     caf::reacts_to<start_atom, step_ptr>, caf::reacts_to<abort_atom, int64_t>,
                     caf::reacts_to<resume_atom, async_call_ptr>>;

/// A variable actor applies updates to one variable, one at a time.
using variable_actor = caf::typed_actor<caf::reacts_to<update_atom, update_request_ptr>>;

/// A device actor spawns node actors for a partition and owns the device's resources.
using device_actor = caf::typed_actor<caf::replies_to<spawn_atom, spawn_request_ptr>::with<status>,
                                      caf::reacts_to<clear_atom>>;

/// The actors of one executor instance, shared by its steps (for abort broadcasts).
struct instance_actors {
  std::vector<node_actor> nodes;
  /// The nodes' setups, alive for as long as the instance or a step of it: consumers in loops
  /// point at them without owning them (consumer::flow_inline).
  std::vector<std::shared_ptr<struct node_setup>> setups;
};

/// What a traced step records per node.
struct trace_buffer {
  std::mutex mu;
  std::vector<node_trace> nodes;
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  int64_t since_origin_ns(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin).count();
  }
};

/// One step in flight: the countdown of nodes still to run, fetched tensors, the first error.
struct step_state {
  int64_t id = 0;
  std::atomic<int> remaining{0};
  std::atomic<bool> aborted{false};
  std::atomic<bool> finished{false};
  std::atomic<uint32_t> done{0};
  std::mutex error_mu;
  status error;
  std::vector<tensor> fetches;
  std::shared_ptr<instance_actors> actors;
  /// Set for traced steps (run_options::trace).
  std::shared_ptr<trace_buffer> trace;
  /// Frames and iterations, for instances with control flow (actors/exec/flow.hpp).
  std::shared_ptr<flow_state> flow;
  /// The step's TensorArrays and Stacks.
  step_resources resources;
  /// Runs once when the step finishes (success or abort), before waiters wake.
  std::function<void(step_state&)> on_finish;

  /// A node ran; the last one finishes the step.
  void node_done() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1)
      finish();
  }
  /// Aborts the step with `s` (the first error wins) and tells every node actor to drop it.
  void fail(status s);
  void finish();
  /// Blocks until finished: spins briefly (steps are often microseconds), then sleeps.
  void wait();
  /// Blocks until finished or `timeout` passed; true when finished.
  bool wait_for(std::chrono::milliseconds timeout);
  std::mutex timed_mu;
  std::condition_variable timed_cv;
  std::atomic<bool> timed_waiter{false};
};

/// Where an output goes: a node actor's input slot.
struct consumer {
  node_actor actor;
  int32_t slot;
  /// With control flow: an Exit or NextIteration, which does nothing with a dead value, so none
  /// is sent to it (one message less per loop iteration: the Exit's).
  bool ignores_dead = false;
  /// Behind an elided NextIteration: the value goes to the next iteration (dead: nowhere).
  bool next_iteration = false;
  /// A cheap consumer on the producer's device whose only missing input this is: the producer
  /// runs it in the same turn instead of sending a message (node_actor.cpp, run_inline).
  std::shared_ptr<struct node_setup> inline_node;
  /// An expensive consumer (not inline_node) on a device with an executor, on the producer's
  /// device, stateless, synchronous, with this as its only missing input: when the value takes
  /// it to the executor, the producer posts it there itself (node_actor.cpp, run_direct)
  /// instead of messaging its actor, which would post it. From an executor's thread that is a
  /// post to its own queue; the actor's turn between two kernels woke a sleeping scheduler
  /// thread and then the sleeping executor thread, ~60 µs on our VMs with both cores busy.
  std::shared_ptr<struct node_setup> direct_node;
  /// An expensive consumer like direct_node but with several inputs to wait for: they wait in
  /// its node_setup::gathered, under a lock, whichever thread delivers them, and the producer
  /// that delivers the last one posts it to its executor itself when its inputs take it there
  /// (node_actor.cpp, gather_input).
  std::shared_ptr<struct node_setup> gather_node;
  /// With control flow: the consumer's setup when its producer may fire it inline
  /// (flow_firing.cpp). Not owning: a loop's consumers form cycles; instance_actors::setups
  /// keeps every setup alive.
  node_setup* flow_inline = nullptr;
};

/// What a control-flow primitive does to frames, iterations and deadness.
enum class flow_kind : uint8_t { plain, switch_op, merge, enter, exit, next_iteration, trigger };
struct flow_node {
  flow_kind kind = flow_kind::plain;
  int child_frame = -1;       ///< Enter: the static frame it enters
  bool is_constant = false;   ///< Enter: a loop invariant
  /// Enter, invariant: some consumers take its value once per frame (node_setup::frame_bound);
  /// its index among its frame's such invariants (flow.hpp, frame_state::constants).
  bool binds = false;
  int constant_index = -1;
  int exit_index = -1;        ///< Exit: its index among its frame's exits
  std::vector<char> back_edge; ///< Merge: per input, whether it comes from a NextIteration
  /// Merge: its value_index output for each input, made once (shared, never written: a buffer
  /// with another holder is not reused in place) instead of allocated every iteration.
  std::vector<tensor> merge_index;
  int forward_inputs = 0, back_inputs = 0;
};

/// Everything a node actor needs, built by the session and fixed before the first step.
struct node_setup : std::enable_shared_from_this<node_setup> {
  std::string name;
  std::string op;
  std::unique_ptr<kernel> kern;
  cpu_device* cpu = nullptr;
  int num_inputs = 0;  ///< data inputs, slots [0, num_inputs)
  int num_control = 0; ///< control inputs, slots after the data inputs
  /// Input values known at instantiation (constants), by slot; other slots are empty.
  std::vector<tensor> bound;
  /// Messages a step must deliver before the node fires (unbound inputs + control inputs).
  int expected = 0;
  /// With control flow: input slots a loop invariant fills once per frame instead of by a
  /// message per iteration, as (slot, the invariant's index in its frame; before plan_frames,
  /// the Enter's node id).
  std::vector<std::pair<int32_t, int32_t>> frame_bound;
  std::vector<std::vector<consumer>> consumers; ///< per output
  std::vector<consumer> control_consumers;
  /// Sends: per output, the rendezvous keys its value goes out under (edges to other devices;
  /// the Send runs inline, in this actor, when the node emits), and keys for control edges.
  std::vector<std::vector<std::string>> send_keys;
  /// Per output, per send key: whether it goes to a GPU of this process (a device value is then
  /// sent as it is, copied GPU to GPU by the consumer, never through the host).
  std::vector<std::vector<char>> send_to_gpu;
  std::vector<std::string> control_send_keys;
  local_rendezvous* rendezvous = nullptr;
  std::vector<std::vector<int>> fetch_slots; ///< per output: indices into step_state::fetches
  /// A node on a GPU: its accelerator, which brings outputs to the host when they are fetched
  /// or sent to another device.
  accelerator* gpu = nullptr;
  /// Per data input: the variable to read when the node fires (inputs fed by a VariableV2).
  std::vector<std::shared_ptr<class variable>> ref_reads;
  bool has_ref_reads = false;
  int num_outputs = 0;
  std::string device; ///< the device's full name (for traces)
  /// An asynchronous kernel whose completion may emit the outputs from the completing thread,
  /// without going back through this node's actor (Recv: the completion is a Send's delivery and
  /// touches no state of the node).
  bool emit_on_completion = false;
  /// The device's executor (an exclusive compute budget), when the device has one and this kernel
  /// may run there: computes on at least `offload_bytes` of input go to it.
  device_executor* executor = nullptr;
  /// In an instance with control flow: inputs and outputs carry flow tags.
  bool dynamic = false;
  flow_node flow;
  /// A _Send or _Recv between processes: in an instance with control flow its rendezvous key
  /// carries the frame and iteration it runs in, and dead values cross as a marker.
  bool crosses_processes = false;
  /// Some producer may run this node inline (consumer::inline_node): its computes then take
  /// `compute_mu`, so that the kernel never runs on two threads at once, unless it is
  /// `reentrant` (kernel::reentrant); `bound_bytes` is the size of its bound inputs (an inline
  /// run stays under offload_bytes in all).
  bool inlinable = false;
  bool reentrant = false;
  size_t bound_bytes = 0;
  std::mutex compute_mu;
  /// In an instance with control flow, a node that producers may run inline keeps its inputs
  /// per (step, frame, iteration) here, under a lock, instead of in its actor: whichever thread
  /// delivers the last one fires it (node_actor.cpp).
  std::shared_ptr<struct shared_flow_inputs> flow_inputs;
  /// Without control flow, a node that producers may post (consumer::gather_node) keeps its
  /// inputs per step here, under a lock, instead of in its actor.
  std::shared_ptr<struct gathered_inputs> gathered;

  std::string describe() const { return "node '" + name + "' (op " + op + ")"; }
};

/// A kernel computing asynchronously, with what it needs when it resumes.
struct async_call {
  step_ptr step;
  std::chrono::steady_clock::time_point started; ///< for traces
  std::vector<tensor> inputs;
  std::unique_ptr<kernel_context> ctx;
  status result;
  flow_tag tag; ///< with control flow: the (frame, iteration) it computes for
};

/// An update for a variable actor.
struct update_request {
  variable::update_fn fn;
  variable::done_fn done;
};

/// What a device actor is asked to spawn: nodes whose kernels it builds.
struct spawn_request {
  const graph* g = nullptr;
  std::vector<int> node_ids;
  std::vector<std::vector<bool>> output_value_needed; ///< per node, per output
  std::vector<std::shared_ptr<node_setup>> setups;    ///< filled in: one per node
  std::vector<node_actor> actors;                     ///< filled in: one per node
};

node_actor::behavior_type node_behavior(node_actor::pointer self,
                                        std::shared_ptr<node_setup> setup);
/// The lock-guarded pending inputs of a node that producers in a loop may fire inline.
std::shared_ptr<shared_flow_inputs> make_shared_flow_inputs();
/// The lock-guarded pending inputs of a node that producers may post (consumer::gather_node).
std::shared_ptr<gathered_inputs> make_gathered_inputs();

class actor_variable;

/// A device's resources: variables, queues and dataset iterators by name, each served by its own
/// actor. Kernels find them when they are built; initialize_iterator finds iterators from outside.
class device_resources : public resource_manager {
public:
  /// `iterator_home`: the resources that hold the runtime's iterators (null: these).
  /// `gpu`: the accelerator of a GPU device, whose variables live in its memory and are read
  /// back through it by readers on CPUs.
  explicit device_resources(caf::actor_system& sys, device_resources* iterator_home = nullptr,
                            tensor_rendezvous* rendezvous = nullptr, accelerator* gpu = nullptr)
      : sys_(sys), iterator_home_(iterator_home), rendezvous_(rendezvous), gpu_(gpu) {}
  tensor_rendezvous* rendezvous() override { return rendezvous_; }
  result<std::shared_ptr<class variable>> find_or_create_variable(const std::string& name, dtype type,
                                                            const shape& s) override;
  result<std::shared_ptr<queue_resource>> find_or_create_queue(const std::string& name,
                                                               const queue_spec& spec) override;
  result<std::shared_ptr<iterator_resource>> find_or_create_iterator(
      const std::string& name) override;
  result<std::shared_ptr<accumulator_resource>> find_or_create_accumulator(
      const std::string& name, const accumulator_spec& spec) override;
  /// Drops every resource (at shutdown).
  void clear();
  /// Elements in each queue and each accumulator's counters, by name (for metrics).
  void gauges(std::vector<std::pair<std::string, int64_t>>& queue_sizes,
              std::vector<std::pair<std::string, accumulator_resource::stats>>& accumulators);

private:
  caf::actor_system& sys_;
  device_resources* iterator_home_;
  tensor_rendezvous* rendezvous_;
  accelerator* gpu_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<actor_variable>> variables_;
  std::unordered_map<std::string, std::shared_ptr<queue_resource>> queues_;
  std::unordered_map<std::string, std::shared_ptr<iterator_resource>> iterators_;
  std::unordered_map<std::string, std::shared_ptr<accumulator_resource>> accumulators_;
};

/// A local device: its actor, its thread pool, its resources and its name.
/// The accelerator of CUDA device `cuda_device` as /device:GPU:`index` (an error in a build
/// without the CUDA kernels) (actors/exec/gpu_device.cpp).
result<std::unique_ptr<accelerator>> make_gpu_accelerator(int index, int cuda_device,
                                                          size_t memory_limit, bool stream_ordered);

struct local_device {
  std::string name;
  device_type type = device_type::cpu;
  std::unique_ptr<cpu_device> cpu;
  /// A GPU device's accelerator (CUDA or simulated); null on a CPU.
  std::unique_ptr<accelerator> gpu;
  /// A GPU's throughput for the cost model, measured on first use.
  std::unique_ptr<std::once_flag> gpu_measured = std::make_unique<std::once_flag>();
  gpu_throughput gpu_speed;
  std::unique_ptr<device_resources> resources;
  /// The device's compute threads, when it has an exclusive budget (runtime_options::device_threads).
  std::unique_ptr<device_executor> executor;
  device_actor actor;
};

/// Ops that only look at shapes or pass buffers along: never worth a trip to an executor.
bool is_metadata_op(const std::string& op);
/// Kernels whose inputs total fewer bytes than this run on the node's actor even on a device
/// with an executor: the hand-off would cost more than the kernel.
inline constexpr size_t offload_bytes = 16 * 1024;

/// The kernels the runtime instantiates: the builtin ones plus those of storage/ (parsing).
const kernel_registry& runtime_kernels();
/// Runs `body` under `mu`; the completions it queued in `ready` run after the lock is released
/// (so a completion that calls back into the resource cannot deadlock). Queues and accumulators
/// serve their operations this way.
template <class F>
void run_locked(std::mutex& mu, std::vector<std::function<void()>>& ready, F&& body) {
  std::vector<std::function<void()>> now;
  {
    std::lock_guard lock(mu);
    body();
    now.swap(ready);
  }
  for (auto& r : now)
    r();
}

/// The runtime's open sessions. Sessions hold it too, so a session destroyed after its runtime
/// still finds it (and finds itself gone from it).
struct session_registry {
  std::mutex mu;
  std::vector<session*> open;
  /// The session the runtime's destructor is closing (it must outlive that call: ~session
  /// waits until it is not this), and what signals changes to both.
  session* closing = nullptr;
  std::condition_variable cv;
};

struct runtime::impl {
  runtime_options options;
  std::vector<gpu_properties> gpus;
  std::string no_gpu_reason;
  std::unique_ptr<caf::actor_system_config> config;
  std::unique_ptr<caf::actor_system> system;
  std::vector<local_device> devices;
  /// Where Send nodes leave tensors for Recv nodes across devices.
  local_rendezvous rendezvous;
  /// What _Send/_Recv kernels use: the local rendezvous, or the network for other processes.
  std::unique_ptr<process_rendezvous> routes;
  /// Step ids, unique across the runtime's sessions (the rendezvous is keyed by them).
  std::atomic<int64_t> next_step_id{1};
  /// The CPU devices' throughput (runtime::cpu_params), measured once.
  std::once_flag cpu_params_once;
  device_params cpu_params;
  /// Open sessions: the runtime closes them if it goes first. Shared with each session, whose
  /// destructor may run after the runtime's.
  std::shared_ptr<session_registry> sessions = std::make_shared<session_registry>();
};

/// The CPU devices' throughput: runtime_options::cpu_params, or measured on first use.
const device_params& resolve_cpu_params(runtime::impl& rt);
/// A GPU device's throughput, measured on first use (zeros when the measurement failed).
const gpu_throughput& resolve_gpu_throughput(local_device& dev);


/// Spawns the device actor for `dev`.
device_actor spawn_device_actor(caf::actor_system& sys, local_device& dev);

} // namespace runnel
