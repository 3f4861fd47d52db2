// Emulated compute: an op that holds its device for a stated time and produces float32 tensors of
// stated shapes. It lets a small machine run many workers of a cluster with the timing and the
// bytes of a real model (apps/train/scaling.cpp, docs/cluster.md); the kernel sleeps, it does
// not spin (ops/cpu/emulation.cpp).
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

RUNNEL_OP_FAMILY(emulation) {
  add(reg, op_def("EmulatedCompute")
               .input_list("inputs", dtype::f32, "N")
               .output_list("outputs", dtype::f32, "M")
               .attr("N", attr_type::integer)
               .attr("M", attr_type::integer)
               // How long the node holds its device, in seconds.
               .attr("seconds", attr_type::real, 0.0)
               // Each output's shape (M of them, fully defined).
               .attr("output_shapes", attr_type::list_shape)
               // Every output element is scale × (the sum of the inputs' first elements).
               .attr("scale", attr_type::real, 1e-3)
               // Never folded, merged or pruned: its time is the point.
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 auto shapes = c.attr<std::vector<shape>>("output_shapes");
                 if (int64_t(shapes.size()) != c.attr<int64_t>("M"))
                   return invalid_argument("EmulatedCompute: " + std::to_string(shapes.size()) +
                                           " output_shapes for M = " +
                                           std::to_string(c.attr<int64_t>("M")) + " outputs");
                 double seconds = c.attr<double>("seconds");
                 if (!(seconds >= 0) || seconds > 3600)
                   return invalid_argument("EmulatedCompute: seconds must be in [0, 3600], got " +
                                           std::to_string(seconds));
                 for (size_t i = 0; i < shapes.size(); ++i) {
                   if (!shapes[i].is_fully_defined())
                     return invalid_argument("EmulatedCompute: output " + std::to_string(i) +
                                             "'s shape " + shapes[i].to_string() +
                                             " must be fully defined");
                   c.set_output(int(i), shapes[i]);
                 }
                 return {};
               }));
}

} // namespace runnel
