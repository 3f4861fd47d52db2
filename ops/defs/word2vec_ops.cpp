// Definition of TensorFlow's fused skip-gram update with negative sampling (word2vec_optimized's
// NegTrain). Kernel: ops/cpu/word2vec.cpp.
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

RUNNEL_OP_FAMILY(word2vec) {
  // For each (example, label) pair, one SGD step of log σ(in·out) + Σ log σ(−in·neg) on the
  // rows of w_in and w_out, in place. Runnel adds one output TensorFlow's lacks, the pairs' mean
  // loss before their update (for progress lines), and `num_threads` (Hogwild threads).
  add(reg, op_def("NegTrain")
               .input("w_in", "T", true)
               .input("w_out", "T", true)
               .input("examples", dtype::i32)
               .input("labels", dtype::i32)
               .input("lr", dtype::f32)
               .output("loss", dtype::f32)
               .type_attr("T", {dtype::f32}, dtype::f32)
               .attr("vocab_count", attr_type::list_int)
               .attr("num_negative_samples", attr_type::integer)
               .attr("num_threads", attr_type::integer, int64_t(1))
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 2));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 2));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(2, 1));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(3, 1));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(4, 0));
                 if (c.attr<int64_t>("num_negative_samples") < 0)
                   return invalid_argument("num_negative_samples must not be negative");
                 c.set_output(0, shape{});
                 return {};
               }));
}

} // namespace runnel
