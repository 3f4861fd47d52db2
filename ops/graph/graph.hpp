#pragma once
// The dataflow graph and the handles the builder API hands out.
//
//   graph g;
//   auto x = placeholder(g, dtype::f32, shape{-1, 784}, "x");
//   auto w = variable(g, random_normal(g, {784, 10}), "w");
//   {
//     auto scope = g.name_scope("logits");        // names become "logits/MatMul", ...
//     auto y = softmax(matmul(x, w.value));
//   }
//
// Nodes are stored in insertion order, which is a topological order: a node's inputs must exist
// before it is added. Every node is checked when it is added (op, attributes, dtypes, shapes), and
// errors name the node. The graph owns its nodes; `output` and `operation` are small handles
// (graph pointer + node id) valid as long as the graph is.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runnel/ops/graph/op_def.hpp"

namespace runnel {

class graph;

/// Output `index` of node `node`.
struct endpoint {
  int node = -1;
  int index = 0;
  friend bool operator==(endpoint a, endpoint b) { return a.node == b.node && a.index == b.index; }
  friend bool operator<(endpoint a, endpoint b) {
    return a.node != b.node ? a.node < b.node : a.index < b.index;
  }
};

/// A node as written in a GraphDef: inputs are "name:index" ("name" means index 0) and
/// "^name" for control inputs.
struct node_def {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;
  std::string device;
  attr_map attrs;
};

/// A node of the graph, with what was inferred when it was added.
struct node {
  int id = -1;
  std::string name;
  std::string op;
  const op_def* def = nullptr;
  std::vector<endpoint> inputs;
  std::vector<int> control_inputs;
  /// The device the user asked for (a full or partial spec), possibly empty.
  std::string device;
  attr_map attrs;
  std::vector<dtype> output_types;
  std::vector<shape> output_shapes;
  /// Names of nodes this one must be placed with (from colocate_with; TensorFlow's "_class").
  std::vector<std::string> colocation;
  /// The control-flow context (cond branch, while loop) whose tensors this node's outputs are, as
  /// an index into graph::flow_contexts(); -1 outside any. An Enter's outputs are in its loop, an
  /// Exit's in the loop's enclosing context.
  int context = -1;

  int num_outputs() const { return int(output_types.size()); }
  /// This node as a node_def (inputs as names).
  node_def to_def(const graph& g) const;
};

/// The name a VariableV2 node's variable has in its runtime: its `shared_name` (or node name),
/// prefixed by its `container` when set. Checkpoints leave the container out
/// (variable_checkpoint_name in actors/state/saver.hpp).
std::string variable_resource_name(const node& variable_node);

/// A tensor produced by a node: what builder functions take and return.
class output {
public:
  output() = default;
  output(graph* g, endpoint e) : g_(g), e_(e) {}
  graph& owner() const { return *g_; }
  endpoint ep() const { return e_; }
  int node_id() const { return e_.node; }
  int index() const { return e_.index; }
  const runnel::node& node() const;
  /// "name:index", or "name" for index 0.
  std::string name() const;
  dtype type() const;
  const runnel::shape& shape() const;
  bool valid() const { return g_ != nullptr; }

private:
  graph* g_ = nullptr;
  endpoint e_;
};

/// A node used for its effect (a target), e.g. an initializer or an update.
class operation {
public:
  operation() = default;
  operation(graph* g, int node) : g_(g), node_(node) {}
  operation(const output& o) : g_(&o.owner()), node_(o.node_id()) {}
  graph& owner() const { return *g_; }
  int node_id() const { return node_; }
  const runnel::node& node() const;
  const std::string& name() const;
  bool valid() const { return g_ != nullptr; }

private:
  graph* g_ = nullptr;
  int node_ = -1;
};

/// A cond branch or a while loop that the builder is inside (ops/layers/control_flow.hpp makes them).
/// Tensors from an enclosing context used inside are imported (a Switch for a branch, a
/// loop-invariant Enter for a loop); tensors from an inner or unrelated context are refused.
class flow_context {
public:
  virtual ~flow_context() = default;
  /// The tensor standing for `e` (a tensor of the enclosing context) inside this context. Called
  /// with the graph in the enclosing context.
  virtual result<endpoint> import(graph& g, endpoint e) = 0;
  /// "the true branch of cond 'cond'", "while loop 'while' (frame 'while/while_context')".
  virtual std::string describe() const = 0;
  /// Whether a variable's ref (an Assign's or an Apply's first input) used inside stays the
  /// variable's, the node waiting on the pivot instead of importing it: a cond branch's way
  /// (TensorFlow's RefSwitch); a loop's frames need the Enter.
  virtual bool gates_refs() const { return false; }

  int id = -1;
  flow_context* outer = nullptr; ///< the enclosing context (null: the graph's top level)
  /// What nodes with no inputs made in this context wait on, so that they run in it (per branch
  /// or iteration) rather than once per step.
  int pivot = -1;
};

class graph {
public:
  explicit graph(const op_registry& ops = builtin_ops()) : ops_(&ops) {}
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;
  graph(graph&&) = default;
  graph& operator=(graph&&) = default;

  const op_registry& ops() const { return *ops_; }

  /// Building a graph is one thread's work, but sessions may read it from others while it grows
  /// (a Python thread adds nodes while another's step starts): a session holds this while it
  /// reads the graph to build a signature's instance; adding a node, a control edge or a back
  /// edge holds it exclusively for the moment it changes the node store.
  std::shared_lock<std::shared_mutex> lock_for_reading() const {
    return std::shared_lock<std::shared_mutex>(*changes_mu_);
  }
  /// For changes made through mutable_node while sessions may be reading.
  std::unique_lock<std::shared_mutex> lock_for_changes() {
    return std::unique_lock<std::shared_mutex>(*changes_mu_);
  }

  /// Adds a node exactly as described (its name must be new; inputs must exist, except a Merge's
  /// input from a NextIteration added later, as in TensorFlow's loops). Used by the GraphDef
  /// loader. Errors name the node.
  result<int> add_node(const node_def& def);
  /// An error naming a Merge input that add_node deferred and no node ever matched.
  status check_complete() const;

  /// Adds a node through the builder: the name is `name_hint` (or the op name) under the current
  /// name scope, made unique (`Add`, `Add_1`, ...); the current device, control dependencies and
  /// colocation apply.
  result<int> add_op(std::string_view op, std::string_view name_hint,
                     const std::vector<endpoint>& inputs, attr_map attrs = {});
  /// Like add_op, but throws runnel::error on failure and returns the node's outputs.
  std::vector<output> build(std::string_view op, std::string_view name_hint,
                            const std::vector<endpoint>& inputs, attr_map attrs = {});

  /// Makes `to` wait for `from`; an edge that would close a cycle is an error.
  status add_control_edge(int from, int to);
  /// Closes a loop: input `slot` of the Merge `merge` becomes `next` (a NextIteration's output).
  /// The only edge allowed to point back to an earlier node.
  status set_back_edge(int merge, int slot, endpoint next);

  /// Control-flow contexts: the graph owns them. `enter_context` makes nodes added inside belong
  /// to `ctx` (their inputs from enclosing contexts are imported) until the guard goes.
  flow_context& add_flow_context(std::unique_ptr<flow_context> ctx);
  flow_context* current_context() const { return context_; }
  const flow_context* context(int id) const {
    return id < 0 ? nullptr : contexts_[size_t(id)].get();
  }

  int num_nodes() const { return int(nodes_.size()); }
  const runnel::node& at(int id) const { return nodes_[size_t(id)]; }
  runnel::node& mutable_node(int id) { return nodes_[size_t(id)]; }
  /// All nodes in insertion order. A deque: references to nodes stay valid as nodes are added.
  const std::deque<runnel::node>& nodes() const { return nodes_; }
  std::optional<int> find(std::string_view name) const;
  /// Parses "name", "name:2" into an endpoint of an existing node; errors name the string.
  result<endpoint> find_endpoint(std::string_view spec) const;
  /// A name no node has yet under the current scope ("while", "while_1", ...), reserved so that
  /// a scope named after it is unique (a cond's or loop's nodes and its frame name).
  std::string reserve_name(std::string_view base) { return unique_name(base); }
  /// The endpoint as "name" (index 0) or "name:index".
  std::string endpoint_name(endpoint e) const;

  // RAII scopes for the builder. Each returns a guard that restores the previous state.
  class scope_guard {
  public:
    scope_guard(scope_guard&& o) noexcept : undo_(std::move(o.undo_)) { o.undo_ = nullptr; }
    ~scope_guard() {
      if (undo_)
        undo_();
    }
    explicit scope_guard(std::function<void()> undo) : undo_(std::move(undo)) {}

  private:
    std::function<void()> undo_;
  };
  /// Nodes added inside get names prefixed with "scope/" (nested scopes stack); an empty name
  /// returns to the root scope until the guard goes.
  [[nodiscard]] scope_guard name_scope(std::string_view name);
  /// Nodes added inside request `device` (a full or partial device spec).
  [[nodiscard]] scope_guard device(std::string_view device);
  /// Nodes added inside get the device `fn` picks for them (it sees the node with the enclosing
  /// scope's device already set; colocation scopes bypass it). TensorFlow's device functions,
  /// e.g. replica_device_setter (ops/train/replica.hpp).
  [[nodiscard]] scope_guard device(std::function<std::string(const node&)> fn);
  /// Nodes added inside run after `ops` (an empty list clears enclosing dependencies).
  [[nodiscard]] scope_guard control_dependencies(std::vector<operation> ops);
  /// Nodes added inside are placed with `op`; enclosing device scopes do not apply to them
  /// (as in TensorFlow).
  [[nodiscard]] scope_guard colocate_with(operation op);
  /// Nodes added inside belong to the control-flow context `ctx` (see add_flow_context).
  [[nodiscard]] scope_guard enter_context(flow_context* ctx);
  /// Nodes added inside are the control-flow builder's own wiring (a cond's Merge reads both
  /// branches): their inputs are taken as they are, not imported or checked.
  [[nodiscard]] scope_guard plumbing();

  /// The graph-level random seed (TensorFlow's tf.set_random_seed); unset by default.
  void set_seed(int64_t seed) { seed_ = seed; }
  std::optional<int64_t> seed() const { return seed_; }

  /// Named lists of nodes, e.g. "variables", "initializers".
  void add_to_collection(const std::string& name, int node) { collections_[name].push_back(node); }
  const std::vector<int>& collection(const std::string& name) const;

  /// A readable dump, one node per line:
  /// `logits = MatMul(x, w) {T=float32, transpose_a=false} -> float32[?,10] @/cpu:0`.
  std::string to_text() const;

  /// The consumers of every node's outputs: consumers()[node] = (consumer node, input slot).
  std::vector<std::vector<std::pair<int, int>>> data_consumers() const;

private:
  std::string unique_name(std::string_view base);
  result<int> finish_node(runnel::node n);

  const op_registry* ops_;
  std::unique_ptr<std::shared_mutex> changes_mu_ = std::make_unique<std::shared_mutex>();
  std::deque<runnel::node> nodes_;
  std::unordered_map<std::string, int> by_name_;
  std::unordered_map<std::string, int> name_counts_;
  std::vector<std::string> scopes_;
  std::string device_;
  std::function<std::string(const node&)> device_fn_;
  std::vector<int> control_deps_;
  std::vector<std::string> colocation_;
  std::optional<int64_t> seed_;
  std::map<std::string, std::vector<int>> collections_;
  std::vector<std::shared_ptr<flow_context>> contexts_;
  flow_context* context_ = nullptr;
  bool importing_ = false;
  struct pending_back_edge {
    int merge;
    int slot;
    std::string spec;
  };
  std::vector<pending_back_edge> pending_back_edges_;
  /// The inputs of a node about to be added in the current context, with outer tensors imported.
  status import_inputs(node& n);
};

} // namespace runnel
