// Definitions of TensorFlow's v1 control-flow primitives: Switch, Merge, Enter, Exit,
// NextIteration, LoopCond and ControlTrigger. What they do to a step (deadness, frames and
// iterations) is the executor's business (actors/exec/flow.cpp); their kernels (ops/cpu/control_flow.cpp)
// only exist so that placement sees them as runnable on a device. The builder API over them is
// ops/layers/control_flow.hpp.
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

void add(op_registry& reg, op_def def) {
  throw_if_error(reg.add(std::move(def)));
}

op_def forward(const char* name) {
  return op_def(name).input("data", "T").output("output", "T").type_attr("T").shape_fn(
      same_shape_as_input(0));
}

} // namespace

bool is_control_flow_op(std::string_view op) {
  return op == "Switch" || op == "Merge" || op == "Enter" || op == "Exit" ||
         op == "NextIteration" || op == "LoopCond" || op == "ControlTrigger";
}

RUNNEL_OP_FAMILY(control_flow) {
  // Forwards `data` to output_true when `pred` is true and to output_false otherwise; the other
  // output is dead.
  add(reg, op_def("Switch")
               .input("data", "T")
               .input("pred", dtype::boolean)
               .output("output_false", "T")
               .output("output_true", "T")
               .type_attr("T")
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 0));
                 c.set_output(0, c.input_shape(0));
                 c.set_output(1, c.input_shape(0));
                 return {};
               }));
  // Forwards the first of its inputs to arrive alive, and that input's index; dead only when
  // every input is dead.
  add(reg, op_def("Merge")
               .input_list("inputs", "T", "N")
               .output("output", "T")
               .output("value_index", dtype::i32)
               .type_attr("T")
               .attr("N", attr_type::integer)
               .shape_fn([](inference_context& c) -> status {
                 // The most specific shape all inputs agree on; unknown dimensions where they
                 // differ (a loop variable whose shape varies).
                 shape out = c.input_shape(0);
                 for (int i = 1; i < c.num_inputs(); ++i) {
                   auto& s = c.input_shape(i);
                   if (!out.has_known_rank() || !s.has_known_rank() || out.rank() != s.rank()) {
                     out = shape::unknown();
                     break;
                   }
                   std::vector<int64_t> dims;
                   for (int d = 0; d < out.rank(); ++d)
                     dims.push_back(out[d] == s[d] ? out[d] : -1);
                   out = shape(std::move(dims));
                 }
                 c.set_output(0, out);
                 c.set_output(1, shape{});
                 return {};
               }));
  // Moves a value into the child frame `frame_name` (iteration 0, or every iteration when
  // `is_constant`: a loop invariant).
  add(reg, forward("Enter")
               .attr("frame_name", attr_type::string)
               .attr("is_constant", attr_type::boolean, false)
               .attr("parallel_iterations", attr_type::integer, int64_t(10)));
  // Moves a value out of its frame, into the frame and iteration that entered it.
  add(reg, forward("Exit"));
  // Moves a value to the next iteration of its frame.
  add(reg, forward("NextIteration"));
  // The loop's predicate: forwards it (the executor's Switches of a loop take it).
  add(reg, op_def("LoopCond")
               .input("input", dtype::boolean)
               .output("output", dtype::boolean)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 0));
                 c.set_output(0, shape{});
                 return {};
               }));
  // Does nothing and is never dead: a target for control edges from nodes that may be dead.
  add(reg, op_def("ControlTrigger"));
}

} // namespace runnel
