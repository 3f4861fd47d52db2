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
  // TensorFlow's tf.multinomial / tf.random.categorical: num_samples class indices per row,
  // drawn with the probabilities softmax(logits[row]).
  add(reg, op_def("Multinomial")
               .input("logits", "T")
               .input("num_samples", dtype::i32)
               .output("output", "output_dtype")
               .type_attr("T", wide_real_types)
               .type_attr("output_dtype", index_types, dtype::i64)
               .attr("seed", attr_type::integer, int64_t(0))
               .attr("seed2", attr_type::integer, int64_t(0))
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 2));
                 shape s = c.input_shape(0);
                 int64_t rows = s.has_known_rank() ? s.dim(0) : -1, samples = -1;
                 if (auto n = const_ints(c, 1); n && n->size() == 1)
                   samples = (*n)[0];
                 c.set_output(0, shape{rows, samples});
                 return {};
               }));
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
