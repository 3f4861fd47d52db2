// Op definitions that rearrange arrays: Pack, Unpack, Split, Squeeze, Tile, Pad, ReverseV2,
// Range, StridedSlice and its gradient.
#include "runnel/ops/graph/strided_slice.hpp"
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

namespace {

strided_slice_masks masks_of(const attr_map& a) {
  return {get_attr<int64_t>(a, "begin_mask"), get_attr<int64_t>(a, "end_mask"),
          get_attr<int64_t>(a, "ellipsis_mask"), get_attr<int64_t>(a, "new_axis_mask"),
          get_attr<int64_t>(a, "shrink_axis_mask")};
}

op_def& slice_masks(op_def& d) {
  for (auto m : {"begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"})
    d.attr(m, attr_type::integer, int64_t(0));
  return d;
}

/// Pack, Unpack and Squeeze.
void add_pack_squeeze_ops(op_registry& reg) {
  add(reg, op_def("Pack")
               .input_list("values", "T", "N")
               .output("output", "T")
               .type_attr("T", all_types)
               .attr("N", attr_type::integer)
               .attr("axis", attr_type::integer, int64_t(0))
               .shape_fn([](inference_context& c) -> status {
                 shape s = c.input_shape(0);
                 for (int i = 1; i < c.num_inputs(); ++i) {
                   auto m = s.merge(c.input_shape(i));
                   if (!m)
                     return c.input_error(i, "has shape " + c.input_shape(i).to_string() +
                                                 " but input 0 has " + s.to_string());
                   s = *m;
                 }
                 if (!s.has_known_rank())
                   return {};
                 int64_t axis = c.attr<int64_t>("axis");
                 RUNNEL_RETURN_IF_ERROR(normalize_axis(axis, s.rank() + 1, "axis"));
                 std::vector<int64_t> dims = s.dims();
                 dims.insert(dims.begin() + axis, c.num_inputs());
                 c.set_output(0, shape(dims));
                 return {};
               }));
  add(reg, op_def("Unpack")
               .input("value", "T")
               .output_list("output", "T", "num")
               .type_attr("T", all_types)
               .attr("num", attr_type::integer)
               .attr("axis", attr_type::integer, int64_t(0))
               .shape_fn([](inference_context& c) -> status {
                 auto& s = c.input_shape(0);
                 if (!s.has_known_rank())
                   return {};
                 int64_t axis = c.attr<int64_t>("axis");
                 RUNNEL_RETURN_IF_ERROR(normalize_axis(axis, s.rank(), "axis"));
                 if (s[int(axis)] >= 0 && s[int(axis)] != c.attr<int64_t>("num"))
                   return invalid_argument("num is " + std::to_string(c.attr<int64_t>("num")) +
                                           " but dimension " + std::to_string(axis) + " of " +
                                           s.to_string() + " has size " +
                                           std::to_string(s[int(axis)]));
                 std::vector<int64_t> dims = s.dims();
                 dims.erase(dims.begin() + axis);
                 for (int o = 0; o < c.num_outputs(); ++o)
                   c.set_output(o, shape(dims));
                 return {};
               }));
  add(reg, op_def("Squeeze")
               .input("input", "T")
               .output("output", "T")
               .type_attr("T", all_types)
               .attr("squeeze_dims", attr_type::list_int, std::vector<int64_t>{})
               .shape_fn([](inference_context& c) -> status {
                 auto& s = c.input_shape(0);
                 if (!s.has_known_rank())
                   return {};
                 auto axes = c.attr<std::vector<int64_t>>("squeeze_dims");
                 std::vector<bool> drop(size_t(s.rank()), false);
                 for (auto a : axes) {
                   RUNNEL_RETURN_IF_ERROR(normalize_axis(a, s.rank(), "squeeze dimension"));
                   if (s[int(a)] >= 0 && s[int(a)] != 1)
                     return invalid_argument("cannot squeeze dimension " + std::to_string(a) +
                                             " of " + s.to_string() + ": it is not 1");
                   drop[size_t(a)] = true;
                 }
                 std::vector<int64_t> out;
                 for (int d = 0; d < s.rank(); ++d) {
                   if (axes.empty() && s[d] == 1)
                     continue;
                   if (axes.empty() && s[d] < 0) {
                     c.set_output(0, shape::unknown());
                     return {};
                   }
                   if (!drop[size_t(d)])
                     out.push_back(s[d]);
                 }
                 c.set_output(0, shape(out));
                 return {};
               }));
}

/// Tile and Pad.
void add_tile_pad_ops(op_registry& reg) {
  add(reg, op_def("Tile")
               .input("input", "T")
               .input("multiples", "Tmultiples")
               .output("output", "T")
               .type_attr("T", all_types)
               .type_attr("Tmultiples", index_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 auto& s = c.input_shape(0);
                 auto m = const_ints(c, 1);
                 if (!s.has_known_rank() || !m)
                   return {};
                 if (int(m->size()) != s.rank())
                   return invalid_argument("multiples has " + std::to_string(m->size()) +
                                           " entries for an input of rank " +
                                           std::to_string(s.rank()));
                 std::vector<int64_t> out;
                 for (int d = 0; d < s.rank(); ++d)
                   out.push_back(s[d] < 0 ? -1 : s[d] * (*m)[size_t(d)]);
                 c.set_output(0, shape(out));
                 return {};
               }));
  add(reg,
      op_def("Pad")
          .input("input", "T")
          .input("paddings", "Tpaddings")
          .output("output", "T")
          .type_attr("T", all_types)
          .type_attr("Tpaddings", index_types, dtype::i32)
          .shape_fn([](inference_context& c) -> status {
            auto& s = c.input_shape(0);
            auto* p = c.input_constant(1);
            if (!s.has_known_rank() || !p)
              return {};
            RUNNEL_ASSIGN_OR_RETURN(auto flat,
                                    to_int64_vector(p->reshaped({p->num_elements()}).value()));
            if (int(flat.size()) != 2 * s.rank())
              return invalid_argument("paddings must be [" + std::to_string(s.rank()) +
                                      ", 2], got " + p->shape().to_string());
            std::vector<int64_t> out;
            for (int d = 0; d < s.rank(); ++d)
              out.push_back(s[d] < 0 ? -1 : s[d] + flat[size_t(2 * d)] + flat[size_t(2 * d + 1)]);
            c.set_output(0, shape(out));
            return {};
          }));
}

/// Range, ReverseV2, Split and strided slices.
void add_range_split_slice_ops(op_registry& reg) {
  add(reg, op_def("Range")
               .input("start", "Tidx")
               .input("limit", "Tidx")
               .input("delta", "Tidx")
               .output("output", "Tidx")
               .type_attr("Tidx", wide_number_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, shape{-1});
                 return {};
               }));
  add(reg, op_def("ReverseV2")
               .input("tensor", "T")
               .input("axis", "Tidx")
               .output("output", "T")
               .type_attr("T", all_types)
               .type_attr("Tidx", index_types, dtype::i32)
               .shape_fn(same_shape_as_input(0)));
  // TensorFlow's ReverseSequence: along seq_dim, the first seq_lengths[b] elements of each
  // slice b of batch_dim reversed, the rest as they are (bidirectional RNNs over padded batches).
  add(reg, op_def("ReverseSequence")
               .input("input", "T")
               .input("seq_lengths", "Tlen")
               .output("output", "T")
               .type_attr("T", all_types)
               .type_attr("Tlen", index_types, dtype::i64)
               .attr("seq_dim", attr_type::integer)
               .attr("batch_dim", attr_type::integer, int64_t(0))
               .shape_fn(same_shape_as_input(0)));
  add(reg, op_def("Split")
               .input("split_dim", dtype::i32)
               .input("value", "T")
               .output_list("output", "T", "num_split")
               .type_attr("T", all_types)
               .attr("num_split", attr_type::integer)
               .shape_fn([](inference_context& c) -> status {
                 auto& s = c.input_shape(1);
                 auto axis = const_ints(c, 0);
                 int64_t n = c.attr<int64_t>("num_split");
                 if (n < 1)
                   return invalid_argument("num_split must be positive");
                 if (!s.has_known_rank() || !axis)
                   return {};
                 int64_t a = (*axis)[0];
                 RUNNEL_RETURN_IF_ERROR(normalize_axis(a, s.rank(), "split dimension"));
                 std::vector<int64_t> dims = s.dims();
                 if (dims[size_t(a)] >= 0) {
                   if (dims[size_t(a)] % n != 0)
                     return invalid_argument("dimension " + std::to_string(a) + " of " +
                                             s.to_string() + " does not divide into " +
                                             std::to_string(n) + " equal parts");
                   dims[size_t(a)] /= n;
                 }
                 for (int o = 0; o < c.num_outputs(); ++o)
                   c.set_output(o, shape(dims));
                 return {};
               }));
  auto ss = op_def("StridedSlice")
                .input("input", "T")
                .input("begin", "Index")
                .input("end", "Index")
                .input("strides", "Index")
                .output("output", "T");
  ss.type_attr("T", all_types).type_attr("Index", index_types, dtype::i32);
  add(reg, slice_masks(ss).shape_fn([](inference_context& c) -> status {
    auto b = const_ints(c, 1), e = const_ints(c, 2), s = const_ints(c, 3);
    if (!b || !e || !s || !c.input_shape(0).has_known_rank())
      return {};
    RUNNEL_ASSIGN_OR_RETURN(auto plan,
                            plan_strided_slice(c.input_shape(0), *b, *e, *s, masks_of(c.attrs())));
    c.set_output(0, shape(plan.output_dims));
    return {};
  }));
  auto grad = op_def("StridedSliceGrad")
                  .input("shape", "Index")
                  .input("begin", "Index")
                  .input("end", "Index")
                  .input("strides", "Index")
                  .input("dy", "T")
                  .output("output", "T");
  grad.type_attr("T", all_types).type_attr("Index", index_types, dtype::i32);
  add(reg, slice_masks(grad).shape_fn([](inference_context& c) { return shape_from_input(c, 0); }));
}

} // namespace

RUNNEL_OP_FAMILY(transform) {
  add_pack_squeeze_ops(reg);
  add_tile_pad_ops(reg);
  add_range_split_slice_ops(reg);
}

} // namespace runnel
