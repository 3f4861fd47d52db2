// Definitions of the data-flow ops: queues (FIFOQueueV2, RandomShuffleQueueV2, PaddingFIFOQueueV2,
// PriorityQueueV2 and the Queue*V2 operations on them) and dataset iterators (IteratorGetNext).
// A queue or iterator node outputs a string scalar naming its resource; the ops that use it take
// that as their first input. Kernels: ops/cpu/data_flow.cpp; the resources live in actors/.
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

void add(op_registry& reg, op_def def) {
  throw_if_error(reg.add(std::move(def)));
}

/// Components of one element: the `shapes` attribute, when given.
status element_shapes(inference_context& c, bool batched, int64_t batch) {
  auto shapes = c.attr<std::vector<shape>>("shapes");
  for (int i = 0; i < c.num_outputs(); ++i) {
    shape s = size_t(i) < shapes.size() ? shapes[size_t(i)] : shape::unknown();
    if (batched) {
      if (!s.has_known_rank()) {
        c.set_output(i, shape::unknown());
        continue;
      }
      std::vector<int64_t> dims{batch};
      dims.insert(dims.end(), s.dims().begin(), s.dims().end());
      s = shape(std::move(dims));
    }
    c.set_output(i, s);
  }
  return {};
}

op_def queue_op(const char* name) {
  return op_def(name)
      .output("handle", dtype::string)
      .attr("component_types", attr_type::list_type)
      .attr("shapes", attr_type::list_shape, std::vector<shape>{})
      .attr("capacity", attr_type::integer, int64_t(-1))
      .attr("container", attr_type::string, std::string())
      .attr("shared_name", attr_type::string, std::string())
      // Runnel: how long a dequeue may wait (ms, -1 forever) before failing with a message.
      .attr("timeout_ms", attr_type::integer, int64_t(60'000))
      // Runnel: what a dequeue that timed out says about why.
      .attr("timeout_hint", attr_type::string, std::string())
      .set_stateful()
      .shape_fn([](inference_context& c) -> status {
        auto types = c.attr<std::vector<dtype>>("component_types");
        if (types.empty())
          return invalid_argument("a queue needs at least one component type");
        auto shapes = c.attr<std::vector<shape>>("shapes");
        if (!shapes.empty() && shapes.size() != types.size())
          return invalid_argument("shapes has " + std::to_string(shapes.size()) +
                                  " entries but component_types has " +
                                  std::to_string(types.size()));
        c.set_output(0, shape{});
        return {};
      });
}

} // namespace

RUNNEL_OP_FAMILY(data_flow) {
  add(reg, queue_op("FIFOQueueV2"));
  add(reg, queue_op("PaddingFIFOQueueV2")
               .attr("padded_shapes", attr_type::list_shape, std::vector<shape>{}));
  add(reg, queue_op("PriorityQueueV2"));
  add(reg, queue_op("RandomShuffleQueueV2")
               .attr("min_after_dequeue", attr_type::integer, int64_t(0))
               .attr("seed", attr_type::integer, int64_t(0))
               .attr("seed2", attr_type::integer, int64_t(0)));

  for (auto name : {"QueueEnqueueV2", "QueueEnqueueManyV2"})
    add(reg, op_def(name)
                 .input("handle", dtype::string)
                 .input_type_list("components", "Tcomponents")
                 .attr("Tcomponents", attr_type::list_type)
                 .attr("timeout_ms", attr_type::integer, int64_t(-1))
                 .set_stateful());
  add(reg, op_def("QueueDequeueV2")
               .input("handle", dtype::string)
               .output_type_list("components", "component_types")
               .attr("component_types", attr_type::list_type)
               .attr("shapes", attr_type::list_shape, std::vector<shape>{})
               .attr("timeout_ms", attr_type::integer, int64_t(-2))
               .set_stateful()
               .shape_fn([](inference_context& c) { return element_shapes(c, false, 0); }));
  for (auto name : {"QueueDequeueManyV2", "QueueDequeueUpToV2"})
    add(reg, op_def(name)
                 .input("handle", dtype::string)
                 .input("n", dtype::i32)
                 .output_type_list("components", "component_types")
                 .attr("component_types", attr_type::list_type)
                 .attr("shapes", attr_type::list_shape, std::vector<shape>{})
                 .attr("timeout_ms", attr_type::integer, int64_t(-2))
                 .set_stateful()
                 .shape_fn([many = std::string(name) == "QueueDequeueManyV2"](
                               inference_context& c) -> status {
                   int64_t batch = -1;
                   if (auto* n = c.input_constant(1); n && many)
                     batch = int64_t(*n->data<int32_t>());
                   return element_shapes(c, true, batch);
                 }));
  // Runnel: enqueues one element into the queue of its bucket, chosen by `length` against
  // `boundaries` (bucket i holds lengths in [boundaries[i-1], boundaries[i])).
  add(reg, op_def("BucketEnqueue")
               .input("length", dtype::i64)
               .input_list("handles", dtype::string, "N")
               .input_type_list("components", "Tcomponents")
               .attr("N", attr_type::integer)
               .attr("Tcomponents", attr_type::list_type)
               .attr("boundaries", attr_type::list_int)
               .attr("timeout_ms", attr_type::integer, int64_t(-1))
               .set_stateful());
  add(reg, op_def("QueueCloseV2")
               .input("handle", dtype::string)
               .attr("cancel_pending_enqueues", attr_type::boolean, false)
               .set_stateful());
  add(reg, op_def("QueueSizeV2")
               .input("handle", dtype::string)
               .output("size", dtype::i32)
               .set_stateful()
               .shape_fn(scalar_shape));

  // Send/Recv between partitions (placement/partition.hpp). The key that pairs them is built
  // from these attributes in TensorFlow's rendezvous format.
  add(reg, op_def("_Send")
               .input("tensor", "T")
               .type_attr("T")
               .attr("tensor_name", attr_type::string)
               .attr("send_device", attr_type::string)
               .attr("send_device_incarnation", attr_type::integer)
               .attr("recv_device", attr_type::string)
               .attr("client_terminated", attr_type::boolean, false)
               .set_stateful());
  add(reg, op_def("_Recv")
               .output("tensor", "tensor_type")
               .type_attr("tensor_type")
               .attr("tensor_name", attr_type::string)
               .attr("send_device", attr_type::string)
               .attr("send_device_incarnation", attr_type::integer)
               .attr("recv_device", attr_type::string)
               .attr("client_terminated", attr_type::boolean, false)
               // Runnel: the shape the sender's side inferred, so shapes survive the cut.
               .attr("shape", attr_type::shape, shape::unknown())
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, c.attr<shape>("shape"));
                 return {};
               }));

  // Dataset iterators: the node names an iterator resource, initialised from C++
  // (make_iterator / iterator::initialize in actors/data/dataset.hpp).
  add(reg, op_def("IteratorGetNext")
               .output_type_list("components", "output_types")
               .attr("output_types", attr_type::list_type)
               .attr("output_shapes", attr_type::list_shape, std::vector<shape>{})
               .attr("shared_name", attr_type::string, std::string())
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 auto shapes = c.attr<std::vector<shape>>("output_shapes");
                 for (int i = 0; i < c.num_outputs(); ++i)
                   c.set_output(i, size_t(i) < shapes.size() ? shapes[size_t(i)]
                                                             : shape::unknown());
                 return {};
               }));
}

} // namespace runnel
