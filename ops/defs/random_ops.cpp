// Random op definitions.
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

RUNNEL_OP_FAMILY(random) {
  for (auto n : {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"})
    add(reg, op_def(n)
                 .input("shape", "T")
                 .output("output", "dtype")
                 .type_attr("T", index_types)
                 .type_attr("dtype", wide_real_types)
                 .attr("seed", attr_type::integer, int64_t(0))
                 .attr("seed2", attr_type::integer, int64_t(0))
                 .set_stateful()
                 .shape_fn([](inference_context& c) { return shape_from_input(c, 0); }));
  add(reg, op_def("RandomShuffle")
               .input("value", "T")
               .output("output", "T")
               .type_attr("T", all_types)
               .attr("seed", attr_type::integer, int64_t(0))
               .attr("seed2", attr_type::integer, int64_t(0))
               .set_stateful()
               .shape_fn(same_shape_as_input(0)));
}

} // namespace runnel
