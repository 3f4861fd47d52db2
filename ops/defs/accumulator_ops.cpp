// Gradient accumulator ops (TensorFlow's ConditionalAccumulator family, with Runnel's additions
// for synchronous training: the replica a gradient comes from, a take timeout that names the
// replicas missing, the dropped count and close), and the two queue ops the sync token barrier
// needs (QueueReset, QueueFail). Kernels: ops/cpu/accumulator_kernels.cpp.
#include "runnel/ops/graph/builder.hpp"
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

} // namespace

RUNNEL_OP_FAMILY(accumulator) {
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
  // Runnel: second gradients of one replica for one step refused so far.
  add(reg, op_def("AccumulatorNumRefused")
               .input("handle", dtype::string)
               .output("num_refused", dtype::i64)
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

} // namespace runnel
