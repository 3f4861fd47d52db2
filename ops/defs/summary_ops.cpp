// Summary op definitions (TensorFlow's); the builders are in ops/layers/summary.cpp, the kernels
// in storage/tf/summary_kernels.cpp.
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

void add(op_registry& reg, op_def def) { throw_if_error(reg.add(std::move(def))); }

const std::vector<dtype> summary_number_types{dtype::f16, dtype::bf16, dtype::f32, dtype::f64,
                                              dtype::i8,  dtype::u8,   dtype::i32, dtype::i64};


} // namespace

RUNNEL_OP_FAMILY(summary) {
  add(reg, op_def("ScalarSummary")
               .input("tags", dtype::string)
               .input("values", "T")
               .output("summary", dtype::string)
               .type_attr("T", summary_number_types)
               .shape_fn([](inference_context& c) -> status {
                 auto& a = c.input_shape(0);
                 auto& b = c.input_shape(1);
                 if (a.is_fully_defined() && b.is_fully_defined() && a != b)
                   return invalid_argument("tags " + a.to_string() + " and values " +
                                           b.to_string() + " must have the same shape");
                 c.set_output(0, shape{});
                 return {};
               }));
  add(reg, op_def("HistogramSummary")
               .input("tag", dtype::string)
               .input("values", "T")
               .output("summary", dtype::string)
               .type_attr("T", summary_number_types, dtype::f32)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 0));
                 c.set_output(0, shape{});
                 return {};
               }));
  add(reg, op_def("ImageSummary")
               .input("tag", dtype::string)
               .input("tensor", "T")
               .output("summary", dtype::string)
               .type_attr("T", {dtype::u8, dtype::f16, dtype::f32, dtype::f64}, dtype::f32)
               .attr("max_images", attr_type::integer, int64_t(3))
               .attr("bad_color", attr_type::tensor,
                     tensor::from_values<uint8_t>({4}, {255, 0, 0, 255}))
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 0));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 4));
                 auto& s = c.input_shape(1);
                 if (s.has_known_rank() && s[3] >= 0 && s[3] != 1 && s[3] != 3 && s[3] != 4)
                   return c.input_error(1, "must have 1, 3 or 4 channels, not " +
                                               std::to_string(s[3]));
                 if (c.attr<int64_t>("max_images") < 1)
                   return invalid_argument("max_images must be at least 1");
                 c.set_output(0, shape{});
                 return {};
               }));
  add(reg, op_def("TensorSummaryV2")
               .input("tag", dtype::string)
               .input("tensor", "T")
               .input("serialized_summary_metadata", dtype::string)
               .output("summary", dtype::string)
               .type_attr("T")
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 0));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(2, 0));
                 c.set_output(0, shape{});
                 return {};
               }));
  add(reg, op_def("MergeSummary")
               .input_list("inputs", dtype::string, "N")
               .output("summary", dtype::string)
               .attr("N", attr_type::integer)
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, shape{});
                 return {};
               }));
}

} // namespace runnel
