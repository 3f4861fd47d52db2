// Op definitions that gradients are built from: StopGradient, BroadcastGradientArgs,
// ReducedShape, BiasAddGrad, Size, Rank, Slice, ExpandDims, UnsortedSegmentSum, ...
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

namespace {

/// StopGradient and the shape helpers of gradients.
void add_gradient_shape_ops(op_registry& reg) {
  add(reg, op_def("StopGradient")
               .input("input", "T")
               .output("output", "T")
               .type_attr("T", all_types)
               .shape_fn(same_shape_as_input(0)));
  add(reg, op_def("BroadcastGradientArgs")
               .input("s0", "T")
               .input("s1", "T")
               .output("r0", "T")
               .output("r1", "T")
               .type_attr("T", index_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, shape{-1});
                 c.set_output(1, shape{-1});
                 return {};
               }));
  add(reg, op_def("ReducedShape")
               .input("input_shape", dtype::i32)
               .input("axes", dtype::i32)
               .output("output", dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, c.input_shape(0));
                 return {};
               }));
  add(reg, op_def("BiasAddGrad")
               .input("out_backprop", "T")
               .output("output", "T")
               .type_attr("T", number_types)
               .attr("data_format", attr_type::string, std::string("NHWC"))
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank_at_least(0, 1));
                 auto& s = c.input_shape(0);
                 c.set_output(0, s.has_known_rank() ? shape{s[s.rank() - 1]} : shape{-1});
                 return {};
               }));
  for (auto n : {"Size", "Rank"})
    add(reg, op_def(n)
                 .input("input", "T")
                 .output("output", "out_type")
                 .type_attr("T", all_types)
                 .type_attr("out_type", index_types, dtype::i32)
                 .shape_fn(scalar_shape));
}

/// Slice, ExpandDims and segment sums.
void add_slice_segment_ops(op_registry& reg) {
  add(reg, op_def("Slice")
               .input("input", "T")
               .input("begin", "Index")
               .input("size", "Index")
               .output("output", "T")
               .type_attr("T", all_types)
               .type_attr("Index", index_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 auto& in = c.input_shape(0);
                 auto begin = const_ints(c, 1);
                 auto size = const_ints(c, 2);
                 if (!in.has_known_rank())
                   return {};
                 if (!begin || !size) {
                   c.set_output(0, shape::unknown_dims(in.rank()));
                   return {};
                 }
                 if (int(begin->size()) != in.rank() || int(size->size()) != in.rank())
                   return invalid_argument("begin and size need " + std::to_string(in.rank()) +
                                           " entries for an input of shape " + in.to_string());
                 std::vector<int64_t> out;
                 for (int d = 0; d < in.rank(); ++d) {
                   int64_t b = (*begin)[size_t(d)], z = (*size)[size_t(d)];
                   if (b < 0 || (in[d] >= 0 && b > in[d]))
                     return invalid_argument("begin[" + std::to_string(d) +
                                             "] = " + std::to_string(b) + " is out of range for " +
                                             in.to_string());
                   if (z == -1)
                     out.push_back(in[d] < 0 ? -1 : in[d] - b);
                   else if (z < 0 || (in[d] >= 0 && b + z > in[d]))
                     return invalid_argument("slice [" + std::to_string(b) + ", +" +
                                             std::to_string(z) + ") of dimension " +
                                             std::to_string(d) + " exceeds " + in.to_string());
                   else
                     out.push_back(z);
                 }
                 c.set_output(0, shape(out));
                 return {};
               }));
  add(reg, op_def("ExpandDims")
               .input("input", "T")
               .input("dim", "Tdim")
               .output("output", "T")
               .type_attr("T", all_types)
               .type_attr("Tdim", index_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 auto& in = c.input_shape(0);
                 auto dim = const_ints(c, 1);
                 if (!in.has_known_rank() || !dim)
                   return {};
                 int64_t d = (*dim)[0];
                 if (d < -(in.rank() + 1) || d > in.rank())
                   return invalid_argument("dim " + std::to_string(d) +
                                           " is out of range for an input of rank " +
                                           std::to_string(in.rank()));
                 if (d < 0)
                   d += in.rank() + 1;
                 std::vector<int64_t> dims = in.dims();
                 dims.insert(dims.begin() + d, 1);
                 c.set_output(0, shape(dims));
                 return {};
               }));
  add(reg, op_def("UnsortedSegmentSum")
               .input("data", "T")
               .input("segment_ids", "Tindices")
               .input("num_segments", "Tnumsegments")
               .output("output", "T")
               .type_attr("T", number_types)
               .type_attr("Tindices", index_types)
               .type_attr("Tnumsegments", index_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 auto& data = c.input_shape(0);
                 auto& ids = c.input_shape(1);
                 auto n = const_ints(c, 2);
                 if (!data.has_known_rank() || !ids.has_known_rank())
                   return {};
                 std::vector<int64_t> out{n ? (*n)[0] : -1};
                 for (int d = ids.rank(); d < data.rank(); ++d)
                   out.push_back(data[d]);
                 c.set_output(0, shape(out));
                 return {};
               }));
}

} // namespace

RUNNEL_OP_FAMILY(grad_support) {
  add_gradient_shape_ops(reg);
  add_slice_segment_ops(reg);
}

} // namespace runnel
