#include "runnel/ops/layers/data_flow.hpp"

#include "runnel/ops/graph/builder.hpp"

namespace runnel {
namespace {

graph_queue make_queue(graph& g, std::string_view op, std::vector<dtype> types,
                       const queue_options& o, std::string_view name, attr_map extra = {}) {
  attr_map attrs{{"component_types", types},
                 {"shapes", o.shapes},
                 {"capacity", o.capacity},
                 {"shared_name", o.shared_name},
                 {"timeout_ms", o.timeout_ms},
                 {"timeout_hint", o.timeout_hint}};
  for (auto& [k, v] : extra)
    attrs[k] = v;
  auto out = g.build(op, name.empty() ? op.substr(0, op.size() - 2) : name, {}, std::move(attrs));
  return graph_queue(out[0], std::move(types), o.shapes);
}

std::vector<endpoint> endpoints(output handle, const std::vector<output>& components) {
  std::vector<endpoint> in{handle.ep()};
  for (auto& c : components) {
    if (&c.owner() != &handle.owner())
      throw error(invalid_argument("'" + c.name() + "' belongs to another graph than queue '" +
                                   handle.node().name + "'"));
    in.push_back(c.ep());
  }
  return in;
}

operation build_op(graph& g, std::string_view op, std::string_view name,
                   const std::vector<endpoint>& in, attr_map attrs = {}) {
  auto id = g.add_op(op, name, in, std::move(attrs));
  if (!id)
    throw error(id.error());
  return operation(&g, *id);
}

} // namespace

operation graph_queue::enqueue(const std::vector<output>& components, std::string_view name) const {
  return build_op(handle_.owner(), "QueueEnqueueV2", name.empty() ? "enqueue" : name,
                  endpoints(handle_, components), {{"Tcomponents", types_}});
}

operation graph_queue::enqueue_many(const std::vector<output>& components,
                                    std::string_view name) const {
  return build_op(handle_.owner(), "QueueEnqueueManyV2", name.empty() ? "enqueue_many" : name,
                  endpoints(handle_, components), {{"Tcomponents", types_}});
}

std::vector<output> graph_queue::dequeue_op(std::string_view op, std::vector<endpoint> in,
                                            std::string_view name) const {
  return handle_.owner().build(op, name, std::move(in),
                               {{"component_types", types_}, {"shapes", shapes_}});
}

std::vector<output> graph_queue::dequeue(std::string_view name) const {
  return dequeue_op("QueueDequeueV2", {handle_.ep()}, name.empty() ? "dequeue" : name);
}
std::vector<output> graph_queue::dequeue_many(int64_t n, std::string_view name) const {
  return dequeue_many(constant(handle_.owner(), int32_t(n)), name);
}
std::vector<output> graph_queue::dequeue_many(output n, std::string_view name) const {
  return dequeue_op("QueueDequeueManyV2", {handle_.ep(), n.ep()},
                    name.empty() ? "dequeue_many" : name);
}
std::vector<output> graph_queue::dequeue_up_to(int64_t n, std::string_view name) const {
  return dequeue_op("QueueDequeueUpToV2", {handle_.ep(), constant(handle_.owner(), int32_t(n)).ep()},
                    name.empty() ? "dequeue_up_to" : name);
}
operation graph_queue::close(bool cancel, std::string_view name) const {
  return build_op(handle_.owner(), "QueueCloseV2", name.empty() ? "close" : name, {handle_.ep()},
                  {{"cancel_pending_enqueues", cancel}});
}
output graph_queue::size(std::string_view name) const {
  return handle_.owner().build("QueueSizeV2", name.empty() ? "size" : name, {handle_.ep()})[0];
}

graph_queue fifo_queue(graph& g, std::vector<dtype> types, queue_options o, std::string_view name) {
  return make_queue(g, "FIFOQueueV2", std::move(types), o, name);
}
graph_queue random_shuffle_queue(graph& g, std::vector<dtype> types, queue_options o,
                                 std::string_view name) {
  return make_queue(g, "RandomShuffleQueueV2", std::move(types), o, name,
                    {{"min_after_dequeue", o.min_after_dequeue}, {"seed", o.seed}});
}
graph_queue padding_fifo_queue(graph& g, std::vector<dtype> types, queue_options o,
                               std::string_view name) {
  return make_queue(g, "PaddingFIFOQueueV2", std::move(types), o, name,
                    {{"padded_shapes", o.padded_shapes}});
}

operation bucket_enqueue(output length, const std::vector<graph_queue>& buckets,
                         const std::vector<int64_t>& boundaries,
                         const std::vector<output>& components, std::string_view name) {
  if (buckets.size() != boundaries.size() + 1)
    throw error(invalid_argument("bucket_enqueue: " + std::to_string(boundaries.size()) +
                                 " boundaries need " + std::to_string(boundaries.size() + 1) +
                                 " queues, got " + std::to_string(buckets.size())));
  graph& g = length.owner();
  std::vector<endpoint> in{length.ep()};
  for (auto& q : buckets)
    in.push_back(q.handle().ep());
  for (auto& c : components)
    in.push_back(c.ep());
  return build_op(g, "BucketEnqueue", name.empty() ? "bucket_enqueue" : name, in,
                  {{"N", int64_t(buckets.size())},
                   {"Tcomponents", buckets.at(0).types()},
                   {"boundaries", boundaries}});
}
graph_queue priority_queue(graph& g, std::vector<dtype> types, queue_options o,
                           std::string_view name) {
  types.insert(types.begin(), dtype::i64);
  if (!o.shapes.empty())
    o.shapes.insert(o.shapes.begin(), shape{});
  return make_queue(g, "PriorityQueueV2", std::move(types), o, name);
}

std::vector<output> iterator_get_next(graph& g, const std::string& iterator_name,
                                      std::vector<dtype> types, std::vector<shape> shapes,
                                      std::string_view name) {
  if (types.empty())
    throw error(invalid_argument("iterator '" + iterator_name + "' needs at least one type"));
  return g.build("IteratorGetNext", name.empty() ? "get_next" : name, {},
                 {{"output_types", types},
                  {"output_shapes", shapes},
                  {"shared_name", iterator_name}});
}

// Gradient accumulators (ops/defs/accumulator_ops.cpp) and the queue ops of the sync barrier.

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
  return build_op(g, "AccumulatorApplyGradient", name.empty() ? "apply_grad" : name,
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
  return build_op(g, "SparseAccumulatorApplyGradient", name.empty() ? "apply_grad" : name,
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
output graph_accumulator::num_refused(std::string_view name) const {
  auto col = handle_.owner().colocate_with(handle_);
  return handle_.owner().build("AccumulatorNumRefused", name.empty() ? "num_refused" : name,
                               {handle_.ep()})[0];
}
operation graph_accumulator::set_global_step(output step, std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  return build_op(handle_.owner(), "AccumulatorSetGlobalStep",
                                         name.empty() ? "set_global_step" : name,
                                         {handle_.ep(), step.ep()});
}
operation graph_accumulator::close(std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  return build_op(handle_.owner(), "AccumulatorClose", name.empty() ? "close" : name,
                                         {handle_.ep()});
}

operation graph_queue::reset(const std::vector<output>& components, std::string_view name) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  std::vector<endpoint> in{handle_.ep()};
  for (auto& c : components)
    in.push_back(c.ep());
  return build_op(handle_.owner(), "QueueReset", name.empty() ? "reset" : name,
                                         std::move(in), {{"Tcomponents", types_}});
}

operation graph_queue::fail(output message, std::string_view name, error_code code) const {
  // Ops on a resource run where it lives, whatever the device scope says.
  auto col = handle_.owner().colocate_with(handle_);
  return build_op(handle_.owner(), "QueueFail", name.empty() ? "fail" : name,
                 {handle_.ep(), message.ep()}, {{"code", int64_t(code)}});
}

} // namespace runnel
