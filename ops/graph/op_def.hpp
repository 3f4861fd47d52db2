#pragma once
// Op definitions: typed inputs and outputs, attributes with defaults and allowed types, and shape
// inference. A registry is built explicitly — no static initialisers:
//
//   op_registry reg;
//   register_builtin_ops(reg);            // ops/defs/*_ops.cpp, a file per family
//   reg.add(op_def{"MyOp"}.input("x", "T").output("y", "T")
//             .type_attr("T", {dtype::f32}).shape_fn(same_shape_as_input(0)));
//
// `builtin_ops()` is the registry of every op Runnel ships, built on first use.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runnel/ops/core/attr.hpp"

namespace runnel {

/// One input or output argument. Its dtype is `fixed`, or the value of the type attribute
/// `type_attr`; with `number_attr` it is a list of that many tensors of one dtype.
struct arg_def {
  std::string name;
  dtype fixed = dtype::invalid;
  std::string type_attr;
  std::string number_attr;
  /// A ref input names the state it updates (a Variable's output); no value flows along it.
  bool is_ref = false;
  /// With `type_list_attr` the argument is a list of tensors whose dtypes are that `list(type)`
  /// attribute (a queue's components: image float32, label int64).
  std::string type_list_attr;

  /// How many tensors this argument stands for on a node with attributes `attrs`.
  int64_t count(const attr_map& attrs) const;
};

struct attr_def {
  std::string name;
  attr_type type;
  std::optional<attr_value> default_value;
  /// For `type` attributes: the dtypes allowed (empty = any).
  std::vector<dtype> allowed;
};

class inference_context;
using shape_function = std::function<status(inference_context&)>;

struct op_def {
  std::string name;
  std::vector<arg_def> inputs;
  std::vector<arg_def> outputs;
  std::vector<attr_def> attrs;
  /// Stateful ops are never merged or pruned as duplicates and may have side effects.
  bool stateful = false;
  shape_function infer_shapes;

  explicit op_def(std::string op_name) : name(std::move(op_name)) {}
  // Fluent construction, used by the builtin op files.
  op_def& input(std::string arg, std::string type_attr, bool is_ref = false);
  op_def& input(std::string arg, dtype fixed);
  op_def& input_list(std::string arg, std::string type_attr, std::string number_attr);
  op_def& output(std::string arg, std::string type_attr);
  op_def& output(std::string arg, dtype fixed);
  op_def& output_list(std::string arg, std::string type_attr, std::string number_attr);
  /// A list of `number_attr` tensors of the fixed dtype `fixed`.
  op_def& input_list(std::string arg, dtype fixed, std::string number_attr);
  op_def& output_list(std::string arg, dtype fixed, std::string number_attr);
  /// Lists whose dtypes are the list(type) attribute `types_attr` (declared separately).
  op_def& input_type_list(std::string arg, std::string types_attr);
  op_def& output_type_list(std::string arg, std::string types_attr);
  op_def& type_attr(std::string attr, std::vector<dtype> allowed = {});
  op_def& type_attr(std::string attr, std::vector<dtype> allowed, dtype default_type);
  op_def& attr(std::string attr, attr_type type, std::optional<attr_value> default_value = {});
  op_def& set_stateful();
  op_def& shape_fn(shape_function fn);

  const attr_def* find_attr_def(std::string_view attr) const;
};

/// What a shape function sees of the node being added.
class inference_context {
public:
  inference_context(const std::string& node_name, const op_def& def, const attr_map& attrs,
                    std::vector<dtype> input_types, std::vector<shape> input_shapes,
                    std::vector<const tensor*> input_constants, size_t num_outputs);

  const std::string& node_name() const { return node_name_; }
  const op_def& def() const { return def_; }
  const attr_map& attrs() const { return attrs_; }
  template <class T> T attr(std::string_view name) const { return get_attr<T>(attrs_, name); }
  int num_inputs() const { return int(input_shapes_.size()); }
  dtype input_type(int i) const { return input_types_[size_t(i)]; }
  const shape& input_shape(int i) const { return input_shapes_[size_t(i)]; }
  /// The value of input `i` when it is known while building (it comes from a Const), else null.
  const tensor* input_constant(int i) const { return input_constants_[size_t(i)]; }
  int num_outputs() const { return int(output_shapes_.size()); }
  void set_output(int i, shape s) { output_shapes_[size_t(i)] = std::move(s); }
  const std::vector<shape>& output_shapes() const { return output_shapes_; }

  /// An invalid_argument status about input `i`, e.g. "input 1 ('b') must be a matrix ...".
  status input_error(int i, const std::string& what) const;
  /// The input's shape with rank checked (unknown rank passes): error names the input.
  status require_rank(int i, int rank) const;
  status require_rank_at_least(int i, int rank) const;

private:
  const std::string& node_name_;
  const op_def& def_;
  const attr_map& attrs_;
  std::vector<dtype> input_types_;
  std::vector<shape> input_shapes_;
  std::vector<const tensor*> input_constants_;
  std::vector<shape> output_shapes_;
};

// Common shape functions.
/// Every output has the shape of input `i`.
shape_function same_shape_as_input(int i);
/// Output 0 is the broadcast of inputs 0 and 1.
status broadcast_binary_shape(inference_context& c);
/// Outputs are scalars.
status scalar_shape(inference_context& c);
/// Output shapes stay unknown.
status unknown_shape(inference_context& c);

/// Output size and leading padding of one spatial dimension of a convolution or pool
/// (TensorFlow's SAME and VALID rules).
result<std::pair<int64_t, int64_t>> conv_output_size(int64_t in, int64_t k, int64_t stride,
                                                     const std::string& padding);

/// A set of op definitions by name.
class op_registry {
public:
  /// Adds `def`; an op of the same name already present is an error.
  status add(op_def def);
  /// The op named `name`, or null.
  const op_def* find(std::string_view name) const;
  /// Like find, but an error names the op and the node that asked for it.
  result<const op_def*> lookup(std::string_view name) const;
  std::vector<std::string> names() const;

private:
  std::unordered_map<std::string, std::unique_ptr<op_def>> ops_;
};

/// Registers every builtin op: each family of ops/defs/ (generated list, ops/defs/builtin_ops.cpp).
void register_builtin_ops(op_registry& reg);

/// Starts the registration function of an op family, in its own file under ops/defs/:
///
///   RUNNEL_OP_FAMILY(linalg) {
///     reg.add(op_def{"MatrixInverse"}...);
///   }
///
/// The build lists every such line (cmake/ops_families.cmake) and register_builtin_ops calls
/// them all: the macro begins its line, and the family is named by one lower-case word. A
/// family written in several files starts each file's part with
/// RUNNEL_OP_FAMILY_PART(family, part).
#define RUNNEL_OP_FAMILY(family)                                                                   \
  void register_##family##_ops(::runnel::op_registry& reg);                                        \
  void register_##family##_ops(::runnel::op_registry& reg)
#define RUNNEL_OP_FAMILY_PART(family, part) RUNNEL_OP_FAMILY(family##_##part)

/// True for the control-flow ops (Switch, Merge, Enter, Exit, NextIteration, LoopCond,
/// ControlTrigger): what the executor runs with frames, iterations and deadness.
bool is_control_flow_op(std::string_view op);

/// The registry of all builtin ops, built explicitly on first use.
const op_registry& builtin_ops();

} // namespace runnel
