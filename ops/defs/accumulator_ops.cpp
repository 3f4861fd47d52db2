// Gradient accumulator ops (TensorFlow's ConditionalAccumulator family, with Runnel's additions
// for synchronous training: the replica a gradient comes from, a take timeout that names the
// replicas missing, the dropped count and close), and the two queue ops the sync token barrier
// needs (QueueReset, QueueFail). Kernels: ops/cpu/accumulator_kernels.cpp.
#include "runnel/ops/kernel/accumulator.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

void add(op_registry& reg, op_def def) {
  throw_if_error(reg.add(std::move(def)));
}

op_def accumulator_op(const char* name) {
  return op_def(name)
      .output("handle", dtype::string)
      .attr("dtype", attr_type::type)
      .attr("shape", attr_type::shape, shape::unknown())
      .attr("container", attr_type::string, std::string())
      .attr("shared_name", attr_type::string, std::string())
      .attr("reduction_type", attr_type::string, std::string("MEAN"))
      // Runnel: the replicas that train (named when a take times out), and the take timeout.
      .attr("total_num_replicas", attr_type::integer, int64_t(0))
      .attr("timeout_ms", attr_type::integer, int64_t(60'000))
      .set_stateful()
      .shape_fn(scalar_shape);
}

/// A node without outputs.
operation make_op(graph& g, std::string_view op, std::string_view name,
                  std::vector<endpoint> in, attr_map attrs = {}) {
  auto id = g.add_op(op, name, std::move(in), std::move(attrs));
  if (!id)
    throw error(id.error());
  return operation(&g, *id);
}

} // namespace

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

void register_accumulator_ops(op_registry& reg) {
  add(reg, accumulator_op("ConditionalAccumulator"));
  add(reg, accumulator_op("SparseConditionalAccumulator"));
  add(reg, op_def("AccumulatorApplyGradient")
               .input("handle", dtype::string)
               .input("local_step", dtype::i64)
               .input("gradient", "dtype")
               .type_attr("dtype")
               .attr("replica", attr_type::integer, int64_t(-1)) // Runnel
               .set_stateful());
  add(reg, op_def("SparseAccumulatorApplyGradient")
               .input("handle", dtype::string)
               .input("local_step", dtype::i64)
               .input("gradient_indices", dtype::i64)
               .input("gradient_values", "dtype")
               .input("gradient_shape", dtype::i64)
               .type_attr("dtype")
               .attr("has_known_shape", attr_type::boolean, true)
               .attr("replica", attr_type::integer, int64_t(-1))
               .set_stateful());
  add(reg, op_def("AccumulatorTakeGradient")
               .input("handle", dtype::string)
               .input("num_required", dtype::i32)
               .output("average", "dtype")
               .type_attr("dtype")
               .attr("element_shape", attr_type::shape, shape::unknown()) // Runnel
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, c.attr<shape>("element_shape"));
                 return {};
               }));
  add(reg, op_def("SparseAccumulatorTakeGradient")
               .input("handle", dtype::string)
               .input("num_required", dtype::i32)
               .output("indices", dtype::i64)
               .output("values", "dtype")
               .output("shape", dtype::i64)
               .type_attr("dtype")
               .attr("element_shape", attr_type::shape, shape::unknown())
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 shape s = c.attr<shape>("element_shape");
                 c.set_output(0, shape{-1});
                 if (s.has_known_rank() && s.rank() >= 1) {
                   std::vector<int64_t> dims(s.dims().begin(), s.dims().end());
                   dims[0] = -1;
                   c.set_output(1, shape(dims));
                   c.set_output(2, shape{s.rank()});
                 } else {
                   c.set_output(1, shape::unknown());
                   c.set_output(2, shape{-1});
                 }
                 return {};
               }));
  add(reg, op_def("AccumulatorNumAccumulated")
               .input("handle", dtype::string)
               .output("num_accumulated", dtype::i32)
               .set_stateful()
               .shape_fn(scalar_shape));
  add(reg, op_def("AccumulatorSetGlobalStep")
               .input("handle", dtype::string)
               .input("new_global_step", dtype::i64)
               .set_stateful());
  // Runnel: stale gradients dropped so far; closing fails waiting and later takes.
  add(reg, op_def("AccumulatorNumDropped")
               .input("handle", dtype::string)
               .output("num_dropped", dtype::i64)
               .set_stateful()
               .shape_fn(scalar_shape));
  add(reg, op_def("AccumulatorClose").input("handle", dtype::string).set_stateful());

  // Runnel: drop a queue's elements, reopen it and enqueue the rows of `components`; and fail
  // the dequeues waiting on it now with `code: message`.
  add(reg, op_def("QueueReset")
               .input("handle", dtype::string)
               .input_type_list("components", "Tcomponents")
               .attr("Tcomponents", attr_type::list_type)
               .set_stateful());
  add(reg, op_def("QueueFail")
               .input("handle", dtype::string)
               .input("message", dtype::string)
               .attr("code", attr_type::integer, int64_t(error_code::unavailable))
               .set_stateful());
}

// Builders.

graph_accumulator conditional_accumulator(graph& g, dtype type, shape s, accumulator_options o,
                                          std::string_view name) {
  auto op = o.sparse ? "SparseConditionalAccumulator" : "ConditionalAccumulator";
  auto out = g.build(op, name.empty() ? std::string_view(op) : name, {},
                     {{"dtype", type},
                      {"shape", s},
                      {"shared_name", o.shared_name},
                      {"reduction_type", o.reduction},
                      {"total_num_replicas", o.total_num_replicas},
                      {"timeout_ms", o.timeout_ms}});
  return graph_accumulator(out[0], type, std::move(s), o.sparse);
}

operation graph_accumulator::apply_grad(output local_step, output grad, int64_t replica,
                                        std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  if (sparse_)
    throw error(invalid_argument("accumulator '" + handle_.node().name +
                                 "' is sparse: apply indexed slices"));
  graph& g = handle_.owner();
  return make_op(g, "AccumulatorApplyGradient", name.empty() ? "apply_grad" : name,
                           {handle_.ep(), local_step.ep(), grad.ep()},
                           {{"dtype", type_}, {"replica", replica}});
}

operation graph_accumulator::apply_slices(output local_step, const indexed_slices& grad,
                                          int64_t replica, std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  if (!sparse_)
    throw error(invalid_argument("accumulator '" + handle_.node().name +
                                 "' is dense: apply a dense gradient"));
  graph& g = handle_.owner();
  output idx = grad.indices.type() == dtype::i64 ? grad.indices : cast(grad.indices, dtype::i64);
  output dense_shape = grad.dense_shape;
  if (!dense_shape.valid())
    dense_shape = constant(g, tensor::vector<int64_t>({}));
  return make_op(g, "SparseAccumulatorApplyGradient", name.empty() ? "apply_grad" : name,
                           {handle_.ep(), local_step.ep(), idx.ep(), grad.values.ep(),
                            dense_shape.ep()},
                           {{"dtype", type_}, {"replica", replica}});
}

output graph_accumulator::take_grad(output num_required, std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  if (sparse_)
    throw error(invalid_argument("accumulator '" + handle_.node().name +
                                 "' is sparse: use take_slices"));
  return handle_.owner().build("AccumulatorTakeGradient", name.empty() ? "take_grad" : name,
                               {handle_.ep(), num_required.ep()},
                               {{"dtype", type_}, {"element_shape", shape_}})[0];
}

indexed_slices graph_accumulator::take_slices(output num_required, std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  auto out = handle_.owner().build("SparseAccumulatorTakeGradient",
                                   name.empty() ? "take_grad" : name,
                                   {handle_.ep(), num_required.ep()},
                                   {{"dtype", type_}, {"element_shape", shape_}});
  return {out[1], out[0], out[2]};
}

output graph_accumulator::num_accumulated(std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  return handle_.owner().build("AccumulatorNumAccumulated",
                               name.empty() ? "num_accumulated" : name, {handle_.ep()})[0];
}
output graph_accumulator::num_dropped(std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  return handle_.owner().build("AccumulatorNumDropped", name.empty() ? "num_dropped" : name,
                               {handle_.ep()})[0];
}
operation graph_accumulator::set_global_step(output step, std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  return make_op(handle_.owner(), "AccumulatorSetGlobalStep",
                                         name.empty() ? "set_global_step" : name,
                                         {handle_.ep(), step.ep()});
}
operation graph_accumulator::close(std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  return make_op(handle_.owner(), "AccumulatorClose", name.empty() ? "close" : name,
                                         {handle_.ep()});
}

operation graph_queue::reset(const std::vector<output>& components, std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  std::vector<endpoint> in{handle_.ep()};
  for (auto& c : components)
    in.push_back(c.ep());
  return make_op(handle_.owner(), "QueueReset", name.empty() ? "reset" : name,
                                         std::move(in), {{"Tcomponents", types_}});
}

operation graph_queue::fail(output message, std::string_view name, error_code code) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  return make_op(handle_.owner(), "QueueFail", name.empty() ? "fail" : name,
                 {handle_.ep(), message.ep()}, {{"code", int64_t(code)}});
}

} // namespace runnel
