// Neural-network op definitions: activations, BiasAdd, softmaxes and cross-entropies, L2Loss,
// InTopK.
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

RUNNEL_OP_FAMILY(nn) {
  add(reg, op_def("BiasAdd")
               .input("value", "T")
               .input("bias", "T")
               .output("output", "T")
               .type_attr("T", number_types)
               .attr("data_format", attr_type::string, std::string("NHWC"))
               .shape_fn([](inference_context& c) -> status {
                 if (c.attr<std::string>("data_format") != "NHWC")
                   return unimplemented("BiasAdd supports data_format NHWC only");
                 RUNNEL_RETURN_IF_ERROR(c.require_rank_at_least(0, 1));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 1));
                 auto& v = c.input_shape(0);
                 auto& b = c.input_shape(1);
                 if (v.has_known_rank() && b.has_known_rank() && v[v.rank() - 1] >= 0 &&
                     b[0] >= 0 && v[v.rank() - 1] != b[0])
                   return invalid_argument("bias has " + std::to_string(b[0]) +
                                           " elements but the last dimension of value " +
                                           v.to_string() + " is " +
                                           std::to_string(v[v.rank() - 1]));
                 c.set_output(0, v);
                 return {};
               }));
  add(reg, op_def("Softmax")
               .input("logits", "T")
               .output("softmax", "T")
               .type_attr("T", real_types)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank_at_least(0, 1));
                 c.set_output(0, c.input_shape(0));
                 return {};
               }));
  add(reg, op_def("SoftmaxCrossEntropyWithLogits")
               .input("features", "T")
               .input("labels", "T")
               .output("loss", "T")
               .output("backprop", "T")
               .type_attr("T", real_types)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 2));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 2));
                 auto m = c.input_shape(0).merge(c.input_shape(1));
                 if (!m)
                   return invalid_argument("logits " + c.input_shape(0).to_string() +
                                           " and labels " + c.input_shape(1).to_string() +
                                           " must have the same shape");
                 shape s = m->has_known_rank() ? *m : shape::unknown_dims(2);
                 c.set_output(0, shape{s[0]});
                 c.set_output(1, s);
                 return {};
               }));
  add(reg, op_def("SparseSoftmaxCrossEntropyWithLogits")
               .input("features", "T")
               .input("labels", "Tlabels")
               .output("loss", "T")
               .output("backprop", "T")
               .type_attr("T", real_types)
               .type_attr("Tlabels", index_types, dtype::i64)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 2));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 1));
                 shape f =
                     c.input_shape(0).has_known_rank() ? c.input_shape(0) : shape::unknown_dims(2);
                 auto& l = c.input_shape(1);
                 if (l.has_known_rank() && l[0] >= 0 && f[0] >= 0 && l[0] != f[0])
                   return invalid_argument("logits " + f.to_string() + " and labels " +
                                           l.to_string() + " disagree on the batch size");
                 c.set_output(0, shape{f[0] >= 0 ? f[0] : (l.has_known_rank() ? l[0] : -1)});
                 c.set_output(1, f);
                 return {};
               }));
  add(reg, op_def("LogSoftmax")
               .input("logits", "T")
               .output("logsoftmax", "T")
               .type_attr("T", real_types)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank_at_least(0, 1));
                 c.set_output(0, c.input_shape(0));
                 return {};
               }));
  add(reg, op_def("L2Loss")
               .input("t", "T")
               .output("output", "T")
               .type_attr("T", real_types)
               .shape_fn(scalar_shape));
  // The k largest entries of each row (last dimension), largest first, ties by lower index.
  add(reg, op_def("TopKV2")
               .input("input", "T")
               .input("k", dtype::i32)
               .output("values", "T")
               .output("indices", dtype::i32)
               .type_attr("T", real_types)
               .attr("sorted", attr_type::boolean, true)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank_at_least(0, 1));
                 shape s = c.input_shape(0);
                 if (s.has_known_rank()) {
                   std::vector<int64_t> dims = s.dims();
                   dims.back() = -1;
                   s = shape(dims);
                 }
                 c.set_output(0, s);
                 c.set_output(1, s);
                 return {};
               }));
  add(reg, op_def("InTopK")
               .input("predictions", dtype::f32)
               .input("targets", "T")
               .output("precision", dtype::boolean)
               .type_attr("T", index_types, dtype::i32)
               .attr("k", attr_type::integer)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 2));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 1));
                 auto& p = c.input_shape(0);
                 c.set_output(0, shape{p.has_known_rank() ? p[0] : -1});
                 return {};
               }));
}

} // namespace runnel
