// Definitions of TensorFlow's FusedBatchNorm and FusedBatchNormGrad (NHWC, or any rank with
// channels last), float32. Kernels: ops/cpu/norm.cpp; builder: batch_norm in
// ops/layers/nn_layers.hpp.
//
// Outputs as TensorFlow's: y, batch_mean, batch_variance (Bessel-corrected, what moving averages
// take), reserve_space_1 (the mean used) and reserve_space_2 (here 1 / sqrt(variance + epsilon),
// what the gradient needs).
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

void add(op_registry& reg, op_def def) {
  throw_if_error(reg.add(std::move(def)));
}

/// The channel count of input `i` (its last dimension), or -1.
int64_t channels(const inference_context& c, int i) {
  auto& s = c.input_shape(i);
  return s.has_known_rank() && s.rank() >= 1 ? s[s.rank() - 1] : -1;
}

status check_vectors(inference_context& c, std::initializer_list<int> inputs) {
  int64_t ch = channels(c, 0);
  for (int i : inputs) {
    RUNNEL_RETURN_IF_ERROR(c.require_rank(i, 1));
    auto& s = c.input_shape(i);
    if (ch >= 0 && s.has_known_rank() && s[0] >= 0 && s[0] != ch)
      return c.input_error(i, "has " + std::to_string(s[0]) + " entries but x has " +
                                  std::to_string(ch) + " channels");
  }
  return {};
}

} // namespace

RUNNEL_OP_FAMILY(norm) {
  add(reg, op_def("FusedBatchNorm")
               .input("x", "T")
               .input("scale", "T")
               .input("offset", "T")
               .input("mean", "T")
               .input("variance", "T")
               .output("y", "T")
               .output("batch_mean", "T")
               .output("batch_variance", "T")
               .output("reserve_space_1", "T")
               .output("reserve_space_2", "T")
               .type_attr("T", {dtype::f32})
               .attr("epsilon", attr_type::real, 1e-4)
               .attr("data_format", attr_type::string, std::string("NHWC"))
               .attr("is_training", attr_type::boolean, true)
               .shape_fn([](inference_context& c) -> status {
                 if (c.attr<std::string>("data_format") != "NHWC")
                   return unimplemented("FusedBatchNorm: only channels-last (NHWC) data");
                 RUNNEL_RETURN_IF_ERROR(c.require_rank_at_least(0, 2));
                 RUNNEL_RETURN_IF_ERROR(check_vectors(c, {1, 2, 3, 4}));
                 c.set_output(0, c.input_shape(0));
                 for (int o = 1; o < 5; ++o)
                   c.set_output(o, shape{channels(c, 0)});
                 return {};
               }));
  add(reg, op_def("FusedBatchNormGrad")
               .input("y_backprop", "T")
               .input("x", "T")
               .input("scale", "T")
               .input("reserve_space_1", "T")
               .input("reserve_space_2", "T")
               .output("x_backprop", "T")
               .output("scale_backprop", "T")
               .output("offset_backprop", "T")
               .output("reserve_space_3", "T")
               .output("reserve_space_4", "T")
               .type_attr("T", {dtype::f32})
               .attr("epsilon", attr_type::real, 1e-4)
               .attr("data_format", attr_type::string, std::string("NHWC"))
               .attr("is_training", attr_type::boolean, true)
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, c.input_shape(1));
                 for (int o = 1; o < 5; ++o)
                   c.set_output(o, shape{channels(c, 1)});
                 return {};
               }));
}

} // namespace runnel
