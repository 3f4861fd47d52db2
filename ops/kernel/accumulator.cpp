// What an accumulator node asks for, read from its attributes (ops/defs/accumulator_ops.cpp
// defines the ops; ops/cpu/accumulator_kernels.cpp and the runtime's devices read them).
#include "runnel/ops/kernel/accumulator.hpp"

namespace runnel {

result<accumulator_spec> accumulator_spec::from_node_attrs(std::string_view op,
                                                           const attr_map& attrs) {
  if (op != "ConditionalAccumulator" && op != "SparseConditionalAccumulator")
    return invalid_argument("'" + std::string(op) + "' is not an accumulator op");
  accumulator_spec s;
  s.sparse = op == "SparseConditionalAccumulator";
  s.type = get_attr<dtype>(attrs, "dtype");
  if (s.type != dtype::f32 && s.type != dtype::f64)
    return invalid_argument("accumulators hold float32 or float64 gradients, not " +
                            std::string(name(s.type)));
  if (auto v = find_attr<shape>(attrs, "shape"))
    s.value_shape = *v;
  if (auto v = find_attr<std::string>(attrs, "reduction_type"))
    s.reduction = *v;
  if (s.reduction != "MEAN" && s.reduction != "SUM")
    return invalid_argument("reduction_type must be MEAN or SUM, got '" + s.reduction + "'");
  if (auto v = find_attr<int64_t>(attrs, "total_num_replicas"))
    s.total_replicas = *v;
  if (auto v = find_attr<int64_t>(attrs, "timeout_ms"))
    s.timeout_ms = *v;
  return s;
}

std::string accumulator_spec::to_string() const {
  return std::string(sparse ? "a sparse " : "a ") + "accumulator of " + std::string(name(type)) +
         value_shape.to_string() + " (" + reduction + ", total_num_replicas " +
         std::to_string(total_replicas) + ", timeout " + std::to_string(timeout_ms) + " ms)";
}

} // namespace runnel
