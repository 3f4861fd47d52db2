// Array op definitions: Const, Placeholder, Identity, shapes, Reshape, Transpose, ConcatV2,
// fills, GatherV2, OneHot, NoOp, Print.
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

namespace {

/// Constants, placeholders, shapes and reshapes.
void add_source_and_shape_ops(op_registry& reg) {
  add(reg, op_def("Const")
               .output("output", "dtype")
               .attr("value", attr_type::tensor)
               .type_attr("dtype", all_types)
               .shape_fn([](inference_context& c) -> status {
                 auto& v = std::get<tensor>(c.attrs().at("value"));
                 if (v.type() != c.attr<dtype>("dtype"))
                   return invalid_argument("value has dtype " + std::string(name(v.type())) +
                                           " but attribute dtype is " +
                                           std::string(name(c.attr<dtype>("dtype"))));
                 c.set_output(0, v.shape());
                 return {};
               }));
  add(reg, op_def("Placeholder")
               .output("output", "dtype")
               .type_attr("dtype", all_types)
               .attr("shape", attr_type::shape, shape::unknown())
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, c.attr<shape>("shape"));
                 return {};
               }));
  add(reg, unary("Identity", all_types));
  // Its input unless fed: a placeholder with a default (a `training` flag that inference
  // leaves alone). Its shape is the one declared, which may be less specific than the default's.
  add(reg,
      op_def("PlaceholderWithDefault")
          .input("input", "dtype")
          .output("output", "dtype")
          .type_attr("dtype", all_types)
          .attr("shape", attr_type::shape)
          .shape_fn([](inference_context& c) -> status {
            auto declared = c.attr<shape>("shape");
            if (!declared.is_compatible_with(c.input_shape(0)))
              return invalid_argument("the default value's shape " + c.input_shape(0).to_string() +
                                      " does not fit the declared shape " + declared.to_string());
            c.set_output(0, declared);
            return {};
          }));
  add(reg, op_def("Shape")
               .input("input", "T")
               .output("output", "out_type")
               .type_attr("T", all_types)
               .type_attr("out_type", index_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, shape{c.input_shape(0).rank()});
                 return {};
               }));
  add(reg, op_def("Reshape")
               .input("tensor", "T")
               .input("shape", "Tshape")
               .output("output", "T")
               .type_attr("T", all_types)
               .type_attr("Tshape", index_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 1));
                 auto dims = const_ints(c, 1);
                 if (!dims) {
                   if (c.input_shape(1).rank() == 1 && c.input_shape(1)[0] >= 0)
                     c.set_output(0, shape::unknown_dims(int(c.input_shape(1)[0])));
                   return {};
                 }
                 int infer = -1;
                 int64_t known = 1;
                 for (size_t i = 0; i < dims->size(); ++i) {
                   if ((*dims)[i] == -1) {
                     if (infer >= 0)
                       return invalid_argument("only one dimension of the new shape may be -1");
                     infer = int(i);
                   } else if ((*dims)[i] < 0) {
                     return invalid_argument("new shape has a negative dimension " +
                                             std::to_string((*dims)[i]));
                   } else {
                     known *= (*dims)[i];
                   }
                 }
                 int64_t total = c.input_shape(0).num_elements();
                 if (total >= 0) {
                   if (infer >= 0) {
                     if (known == 0 || total % known != 0)
                       return invalid_argument("cannot reshape a tensor of shape " +
                                               c.input_shape(0).to_string() + " (" +
                                               std::to_string(total) + " elements) to " +
                                               shape(*dims).to_string());
                     (*dims)[size_t(infer)] = total / known;
                   } else if (known != total) {
                     return invalid_argument(
                         "cannot reshape a tensor of shape " + c.input_shape(0).to_string() + " (" +
                         std::to_string(total) + " elements) to " + shape(*dims).to_string() +
                         " (" + std::to_string(known) + " elements)");
                   }
                 }
                 c.set_output(0, shape(*dims));
                 return {};
               }));
}

/// Transpose and concatenation.
void add_transpose_concat_ops(op_registry& reg) {
  add(reg, op_def("Transpose")
               .input("x", "T")
               .input("perm", "Tperm")
               .output("y", "T")
               .type_attr("T", all_types)
               .type_attr("Tperm", index_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 auto& in = c.input_shape(0);
                 auto perm = const_ints(c, 1);
                 if (!perm || !in.has_known_rank()) {
                   if (in.has_known_rank())
                     c.set_output(0, shape::unknown_dims(in.rank()));
                   return {};
                 }
                 if (int(perm->size()) != in.rank())
                   return invalid_argument("perm has " + std::to_string(perm->size()) +
                                           " entries but x has rank " + std::to_string(in.rank()));
                 std::vector<int64_t> out;
                 std::vector<bool> used(perm->size(), false);
                 for (auto p : *perm) {
                   if (p < 0 || p >= in.rank() || used[size_t(p)])
                     return invalid_argument("perm " + shape(*perm).to_string() +
                                             " is not a permutation of 0.." +
                                             std::to_string(in.rank() - 1));
                   used[size_t(p)] = true;
                   out.push_back(in[int(p)]);
                 }
                 c.set_output(0, shape(out));
                 return {};
               }));
  add(reg, op_def("ConcatV2")
               .input_list("values", "T", "N")
               .input("axis", "Tidx")
               .output("output", "T")
               .type_attr("T", all_types)
               .type_attr("Tidx", index_types, dtype::i32)
               .attr("N", attr_type::integer)
               .shape_fn([](inference_context& c) -> status {
                 int n = c.num_inputs() - 1;
                 if (n < 1)
                   return invalid_argument("ConcatV2 needs at least one value");
                 auto axis = const_ints(c, n);
                 int rank = -1;
                 for (int i = 0; i < n; ++i)
                   if (c.input_shape(i).has_known_rank()) {
                     if (rank >= 0 && c.input_shape(i).rank() != rank)
                       return c.input_error(i, "has shape " + c.input_shape(i).to_string() +
                                                   ", whose rank differs from input 0's " +
                                                   c.input_shape(0).to_string());
                     rank = c.input_shape(i).rank();
                   }
                 if (rank < 0)
                   return {};
                 if (rank == 0)
                   return invalid_argument("cannot concatenate scalars; use Pack");
                 if (!axis) {
                   c.set_output(0, shape::unknown_dims(rank));
                   return {};
                 }
                 int64_t a = (*axis)[0];
                 RUNNEL_RETURN_IF_ERROR(normalize_axis(a, rank, "concat axis"));
                 std::vector<int64_t> out = shape::unknown_dims(rank).dims();
                 int64_t total = 0;
                 for (int i = 0; i < n; ++i) {
                   auto& s = c.input_shape(i);
                   if (!s.has_known_rank()) {
                     total = -1;
                     continue;
                   }
                   for (int d = 0; d < rank; ++d) {
                     if (d == a)
                       continue;
                     if (out[size_t(d)] < 0)
                       out[size_t(d)] = s[d];
                     else if (s[d] >= 0 && s[d] != out[size_t(d)])
                       return c.input_error(i, "has shape " + s.to_string() +
                                                   ", which differs from the others in "
                                                   "dimension " +
                                                   std::to_string(d));
                   }
                   total = (total < 0 || s[int(a)] < 0) ? -1 : total + s[int(a)];
                 }
                 out[size_t(a)] = total;
                 c.set_output(0, shape(out));
                 return {};
               }));
}

/// Fill, gathers, one-hot, NoOp, Assert and Print.
void add_fill_gather_ops(op_registry& reg) {
  add(reg, op_def("Fill")
               .input("dims", "index_type")
               .input("value", "T")
               .output("output", "T")
               .type_attr("T", all_types)
               .type_attr("index_type", index_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 1));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 0));
                 return shape_from_input(c, 0);
               }));
  add(reg, unary("ZerosLike", castable_types));
  add(reg, unary("OnesLike", castable_types));
  add(reg, op_def("GatherV2")
               .input("params", "Tparams")
               .input("indices", "Tindices")
               .input("axis", "Taxis")
               .output("output", "Tparams")
               .type_attr("Tparams", all_types)
               .type_attr("Tindices", index_types)
               .type_attr("Taxis", index_types, dtype::i32)
               .shape_fn([](inference_context& c) -> status {
                 auto& p = c.input_shape(0);
                 auto& idx = c.input_shape(1);
                 auto axis = const_ints(c, 2);
                 if (!p.has_known_rank() || !idx.has_known_rank() || !axis)
                   return {};
                 int64_t a = (*axis)[0];
                 if (p.rank() < 1)
                   return c.input_error(0, "must have rank at least 1");
                 RUNNEL_RETURN_IF_ERROR(normalize_axis(a, p.rank(), "gather axis"));
                 std::vector<int64_t> out(p.dims().begin(), p.dims().begin() + a);
                 out.insert(out.end(), idx.dims().begin(), idx.dims().end());
                 out.insert(out.end(), p.dims().begin() + a + 1, p.dims().end());
                 c.set_output(0, shape(out));
                 return {};
               }));
  add(reg, op_def("OneHot")
               .input("indices", "TI")
               .input("depth", dtype::i32)
               .input("on_value", "T")
               .input("off_value", "T")
               .output("output", "T")
               .type_attr("T", castable_types)
               .type_attr("TI", {dtype::u8, dtype::i32, dtype::i64}, dtype::i64)
               .attr("axis", attr_type::integer, int64_t(-1))
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 0));
                 auto& idx = c.input_shape(0);
                 if (!idx.has_known_rank())
                   return {};
                 int64_t axis = c.attr<int64_t>("axis");
                 if (axis < -1 || axis > idx.rank())
                   return invalid_argument("axis " + std::to_string(axis) +
                                           " is out of range for indices of rank " +
                                           std::to_string(idx.rank()));
                 auto depth = const_ints(c, 1);
                 if (depth && (*depth)[0] < 0)
                   return invalid_argument("depth must be non-negative, got " +
                                           std::to_string((*depth)[0]));
                 std::vector<int64_t> out = idx.dims();
                 out.insert(out.begin() + (axis == -1 ? idx.rank() : axis),
                            depth ? (*depth)[0] : shape::unknown_dim);
                 c.set_output(0, shape(out));
                 return {};
               }));
  add(reg, op_def("NoOp"));
  // TensorFlow's Assert: fails the step with invalid_argument when `condition` is false, the
  // message made of `data` (strings as they are, other tensors' first `summarize` values).
  add(reg, op_def("Assert")
               .input("condition", dtype::boolean)
               .input_type_list("data", "T")
               .attr("T", attr_type::list_type)
               .attr("summarize", attr_type::integer, int64_t(3))
               .set_stateful());
  // TensorFlow's IdentityN: each input unchanged as the output of its index. The importer puts
  // one after an op whose outputs Runnel orders otherwise (TensorFlow's ParseExample), so
  // "node:i" keeps meaning what it meant in TensorFlow.
  add(reg, op_def("IdentityN")
               .input_type_list("input", "T")
               .output_type_list("output", "T")
               .attr("T", attr_type::list_type)
               .shape_fn([](inference_context& c) -> status {
                 for (int i = 0; i < c.num_inputs(); ++i)
                   c.set_output(i, c.input_shape(i));
                 return {};
               }));
  add(reg, op_def("Print")
               .input("input", "T")
               .output("output", "T")
               .type_attr("T", all_types)
               .attr("message", attr_type::string, std::string())
               .attr("first_n", attr_type::integer, int64_t(-1))
               .attr("summarize", attr_type::integer, int64_t(3))
               .set_stateful()
               .shape_fn(same_shape_as_input(0)));
}

} // namespace

RUNNEL_OP_FAMILY(array) {
  add_source_and_shape_ops(reg);
  add_transpose_concat_ops(reg);
  add_fill_gather_ops(reg);
}

} // namespace runnel
