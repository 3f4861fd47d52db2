#pragma once
// Kernels: the code that computes a node on one kind of device.
//
//   // ops/cpu/my_op.cpp
//   class my_op_kernel : public kernel {
//   public:
//     status compute(kernel_context& ctx) override {
//       const tensor& x = ctx.input(0);
//       tensor& y = ctx.allocate_output(0, x.type(), x.shape());
//       ...
//       return {};
//     }
//   };
//   reg.add("MyOp", device_type::cpu, {dtype::f32}, make_simple_kernel<my_op_kernel>);
//
// A kernel is constructed once per node per executor instance (attributes are read then, never in
// the hot path) and then computes once per step. The runtime never runs one kernel object on two
// threads at once. Kernels return errors as status values; the runtime adds the node's name and op.

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runnel/ops/graph/graph.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel {

enum class device_type { cpu, gpu };
const char* to_string(device_type t);

class cpu_device;
class accelerator;
class variable;
class queue_resource;
class accumulator_resource;
struct accumulator_spec;
class iterator_resource;
class step_resources;
struct queue_spec;

/// Where _Send and _Recv kernels exchange tensors: the runtime's rendezvous, which hands a tensor
/// to a Recv in this process, or through the network to the process that owns `recv_device`.
class tensor_rendezvous {
public:
  virtual ~tensor_rendezvous() = default;
  /// Sends `value` for step `step` under `key` to the Recv on `recv_device`; `done` gets the
  /// outcome (at once in a process, once written over the network).
  virtual void send(int64_t step, const std::string& key, const std::string& recv_device,
                    tensor value, std::function<void(status)> done) = 0;
  /// The same; with `wire_bf16` a float32 value crossing processes travels as bfloat16 (the
  /// low 16 mantissa bits dropped; widened on arrival). In a process it changes nothing.
  virtual void send(int64_t step, const std::string& key, const std::string& recv_device,
                    tensor value, bool wire_bf16, std::function<void(status)> done) {
    (void)wire_bf16;
    send(step, key, recv_device, std::move(value), std::move(done));
  }
  /// Calls `done` with the value once it is sent (or with the error that ended the step).
  virtual void recv(int64_t step, const std::string& key,
                    std::function<void(status, tensor)> done) = 0;
};

/// Where stateful kernels find the state they read and update; the runtime implements it.
class resource_manager {
public:
  virtual ~resource_manager() = default;
  /// The variable called `name`, created (uninitialised) on first use.
  virtual result<std::shared_ptr<class variable>> find_or_create_variable(const std::string& name,
                                                                    dtype type, const shape& s) = 0;
  /// The queue called `name`, created with `spec` on first use; an existing queue with another
  /// spec is an error naming both.
  virtual result<std::shared_ptr<queue_resource>> find_or_create_queue(const std::string& name,
                                                                       const queue_spec& spec);
  /// The gradient accumulator called `name`, created with `spec` on first use; an existing one
  /// with another spec is an error naming both.
  virtual result<std::shared_ptr<accumulator_resource>> find_or_create_accumulator(
      const std::string& name, const accumulator_spec& spec);
  /// The dataset iterator called `name`, created uninitialised on first use.
  virtual result<std::shared_ptr<iterator_resource>> find_or_create_iterator(
      const std::string& name);
  /// The rendezvous of _Send and _Recv nodes (null: this runtime has none).
  virtual tensor_rendezvous* rendezvous() { return nullptr; }
};

/// What a kernel factory sees of the node it builds a kernel for.
struct kernel_construction {
  const runnel::node& node;
  const runnel::graph& graph;
  device_type device = device_type::cpu;
  cpu_device* cpu = nullptr;
  resource_manager* resources = nullptr;
  /// For each output: whether some consumer reads its value (false when the only consumers are
  /// ref inputs, e.g. the Assign that initialises a variable).
  std::vector<bool> output_value_needed;
  /// The GPU of a node placed on one (null on a CPU).
  accelerator* gpu = nullptr;

  template <class T> T attr(std::string_view name) const { return get_attr<T>(node.attrs, name); }
};

/// Inputs and outputs of one computation of one node.
class kernel_context {
public:
  kernel_context(std::span<const tensor> inputs, int num_outputs, cpu_device* cpu)
      : inputs_(inputs), outputs_(size_t(num_outputs)), cpu_(cpu) {}

  int num_inputs() const { return int(inputs_.size()); }
  const tensor& input(int i) const { return inputs_[size_t(i)]; }
  std::span<const tensor> inputs() const { return inputs_; }
  cpu_device& cpu() const { return *cpu_; }
  bool has_cpu() const { return cpu_ != nullptr; }

  /// Allocates output `i`.
  tensor& allocate_output(int i, dtype t, shape s) {
    outputs_[size_t(i)] = tensor(t, std::move(s));
    return outputs_[size_t(i)];
  }
  /// Output `i` reusing input `in`'s buffer when nobody else holds it, else a fresh allocation.
  tensor& forward_or_allocate_output(int i, int in, dtype t, const shape& s);
  void set_output(int i, tensor t) { outputs_[size_t(i)] = std::move(t); }
  tensor& output(int i) { return outputs_[size_t(i)]; }
  std::vector<tensor>& outputs() { return outputs_; }

  /// The id of the step being computed (Send/Recv key their tensors by it).
  int64_t step_id() const { return step_id_; }
  void set_step_id(int64_t id) { step_id_ = id; }
  /// The step's TensorArrays and Stacks (null outside a session step).
  step_resources* step_container() const { return step_resources_; }
  /// Inside a while loop: "<frame id>:<iteration>", the frame_iter field of the rendezvous keys
  /// of _Send and _Recv (set only for them); empty at the step's top level.
  const std::string& frame_iter() const { return frame_iter_; }
  void set_frame_iter(std::string f) { frame_iter_ = std::move(f); }
  void set_step_container(step_resources* r) { step_resources_ = r; }

  /// For asynchronous kernels: whether the step was aborted while they waited (e.g. a dequeue,
  /// which then gives its elements back instead of losing them).
  bool step_aborted() const { return aborted_ && aborted_->load(std::memory_order_acquire); }
  void set_abort_flag(const std::atomic<bool>* flag) { aborted_ = flag; }

private:
  std::span<const tensor> inputs_;
  std::vector<tensor> outputs_;
  cpu_device* cpu_;
  const std::atomic<bool>* aborted_ = nullptr;
  int64_t step_id_ = 0;
  step_resources* step_resources_ = nullptr;
  std::string frame_iter_;
};

class kernel {
public:
  virtual ~kernel() = default;
  /// Computes synchronously.
  virtual status compute(kernel_context& ctx) = 0;
  /// Async kernels (variable updates) finish later, from another thread, by calling `done`.
  virtual bool is_async() const { return false; }
  virtual void compute_async(kernel_context& ctx, std::function<void(status)> done) {
    done(compute(ctx));
  }
  /// The variable a VariableV2 kernel stands for (null for other kernels). Consumers of its
  /// output read the variable themselves, when they run, as TensorFlow's ref edges do.
  virtual std::shared_ptr<class variable> variable_resource() const { return nullptr; }
  /// True for kernels that may be given inputs in device memory although they compute on the
  /// host: those that only look at shapes or pass buffers along (Reshape, Shape, Identity on a
  /// GPU). Other synchronous kernels are refused device inputs before they run.
  virtual bool accepts_device_inputs() const { return false; }
  /// True for kernels whose compute keeps nothing between calls (no cached plan, primitive or
  /// scratch buffer: only what the constructor set), so that two threads may run it at once.
  /// A node that producers may run inline then fires without its lock (actors/exec/
  /// node_actor.cpp); others take it, as two steps in flight may fire the node together.
  virtual bool reentrant() const { return false; }
};

/// For each input slot of `n`: whether it is a ref input (no value flows along it).
std::vector<bool> ref_input_slots(const node& n);

/// The variable behind input `input` of the node being built (it must come from a VariableV2),
/// created in the device's resources on first use.
result<std::shared_ptr<class variable>> input_variable(const kernel_construction& c, int input);
/// The variable a VariableV2 node stands for.
result<std::shared_ptr<class variable>> node_variable(const kernel_construction& c, const node& var_node);

using kernel_factory = std::function<result<std::unique_ptr<kernel>>(const kernel_construction&)>;

/// A factory for kernels whose constructor takes the kernel_construction.
template <class K> result<std::unique_ptr<kernel>> make_kernel(const kernel_construction& c) {
  return std::unique_ptr<kernel>(std::make_unique<K>(c));
}
/// A factory for kernels with a default constructor.
template <class K> result<std::unique_ptr<kernel>> make_simple_kernel(const kernel_construction&) {
  return std::unique_ptr<kernel>(std::make_unique<K>());
}

/// Kernels by (op, device type, dtype of the op's type attribute).
class kernel_registry {
public:
  /// Registers `factory` for `op` on `device` when the node's attribute `type_attr` is one of
  /// `types` (empty `types`: any node of that op).
  void add(const std::string& op, device_type device, std::vector<dtype> types,
           kernel_factory factory, std::string type_attr = "T");
  /// The factory for `n` on `device`, or an error naming the node, op, dtype and device.
  result<const kernel_factory*> find(const node& n, device_type device) const;
  /// True when some kernel exists for `n` on `device`.
  bool has_kernel(const node& n, device_type device) const { return find(n, device).ok(); }

  /// One registration, as `add` received it.
  struct registration {
    std::string op;
    device_type device;
    std::vector<dtype> types;
    std::string type_attr;
    kernel_factory factory;
  };
  /// Every registration (to derive kernels from others, e.g. the 16-bit float wrappers).
  std::vector<registration> registrations() const;

private:
  struct entry {
    device_type device;
    std::vector<dtype> types;
    std::string type_attr;
    kernel_factory factory;
  };
  std::unordered_map<std::string, std::vector<entry>> kernels_;
};

/// Starts the registration function of a CPU kernel family, in its own file under ops/cpu/:
///
///   RUNNEL_KERNEL_FAMILY(linalg) {
///     reg.add("MatrixInverse", device_type::cpu, {dtype::f32, dtype::f64}, ...);
///   }
///
/// The build lists every such line (cmake/ops_families.cmake) and register_builtin_kernels
/// calls them all: the macro begins its line, and the family is named by one lower-case word.
/// Families register in any order, so an op's kernels on one device take disjoint types (a
/// coverage test checks it). RUNNEL_KERNEL_WRAPPERS starts a family whose kernels are made from
/// the others' (the 16-bit float wrappers): those run after every RUNNEL_KERNEL_FAMILY. A family
/// written in several files starts each file's part with RUNNEL_KERNEL_FAMILY_PART(family, part).
#define RUNNEL_KERNEL_FAMILY(family)                                                               \
  void register_##family##_kernels(::runnel::kernel_registry& reg);                                \
  void register_##family##_kernels(::runnel::kernel_registry& reg)
#define RUNNEL_KERNEL_WRAPPERS(family) RUNNEL_KERNEL_FAMILY(family)
#define RUNNEL_KERNEL_FAMILY_PART(family, part) RUNNEL_KERNEL_FAMILY(family##_##part)

} // namespace runnel
