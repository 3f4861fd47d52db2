// Math op definitions: element-wise arithmetic, comparisons, logic, casts, AddN,
// MatMul and BatchMatMul, reductions.
#include "runnel/ops/core/binary_ops.hpp"
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

namespace {

/// The binary element-wise ops (one row each in ops/core/binary_ops.hpp), LogicalNot and Select.
void add_binary_ops(op_registry& reg) {
  for (auto& b : binary_ops)
    switch (b.kind) {
      case binary_kind::numbers:
        add(reg, binary(b.name, number_types));
        break;
      case binary_kind::reals:
        add(reg, binary(b.name, real_types));
        break;
      case binary_kind::compare:
        add(reg, comparison(b.name, number_types));
        break;
      case binary_kind::equality:
        add(reg, comparison(b.name, {dtype::f32, dtype::f64, dtype::i32, dtype::i64, dtype::boolean,
                                     dtype::string}));
        break;
      case binary_kind::logical:
        add(reg, op_def(b.name)
                     .input("x", dtype::boolean)
                     .input("y", dtype::boolean)
                     .output("z", dtype::boolean)
                     .shape_fn(broadcast_binary_shape));
        break;
    }
  add(reg, op_def("LogicalNot")
               .input("x", dtype::boolean)
               .output("y", dtype::boolean)
               .shape_fn(same_shape_as_input(0)));
  add(reg, op_def("Select")
               .input("condition", dtype::boolean)
               .input("t", "T")
               .input("e", "T")
               .output("output", "T")
               .type_attr("T", all_types)
               .shape_fn([](inference_context& c) -> status {
                 auto m = c.input_shape(1).merge(c.input_shape(2));
                 if (!m)
                   return invalid_argument("t " + c.input_shape(1).to_string() + " and e " +
                                           c.input_shape(2).to_string() +
                                           " must have the same shape");
                 c.set_output(0, *m);
                 return {};
               }));
}

/// The unary table's rows, their gradients, casts, AddN.
void add_unary_ops(op_registry& reg) {
  // The unary element-wise ops: one row each in ops/core/unary_ops.hpp.
  for (auto& u : unary_ops)
    add(reg, unary(u.name, u.integers ? number_types : real_types));
  // The gradient of the rows whose functor has `grad`: dx = grad(x, y, dy), element-wise.
  add(reg, op_def("_UnaryGrad")
               .input("x", "T")
               .input("y", "T")
               .input("dy", "T")
               .output("dx", "T")
               .type_attr("T", real_types)
               .attr("op", attr_type::string)
               .shape_fn([](inference_context& c) -> status {
                 auto op = c.attr<std::string>("op");
                 auto* row = find_unary_op(op);
                 if (!row || !row->has_grad)
                   return invalid_argument("_UnaryGrad: '" + op +
                                           "' is not a unary op whose functor gives a gradient "
                                           "(ops/core/unary_ops.hpp)");
                 auto m = c.input_shape(0).merge(c.input_shape(2));
                 if (!m)
                   return invalid_argument("_UnaryGrad: x " + c.input_shape(0).to_string() +
                                           " and dy " + c.input_shape(2).to_string() +
                                           " must have the same shape");
                 c.set_output(0, *m);
                 return {};
               }));
  add(reg, op_def("Cast")
               .input("x", "SrcT")
               .output("y", "DstT")
               .type_attr("SrcT", castable_types)
               .type_attr("DstT", castable_types)
               .attr("Truncate", attr_type::boolean, false)
               .shape_fn(same_shape_as_input(0)));
  add(reg, op_def("AddN")
               .input_list("inputs", "T", "N")
               .output("sum", "T")
               .type_attr("T", number_types)
               .attr("N", attr_type::integer)
               .shape_fn([](inference_context& c) -> status {
                 if (c.num_inputs() < 1)
                   return invalid_argument("AddN needs at least one input");
                 shape s = c.input_shape(0);
                 for (int i = 1; i < c.num_inputs(); ++i) {
                   auto m = s.merge(c.input_shape(i));
                   if (!m)
                     return c.input_error(i, "has shape " + c.input_shape(i).to_string() +
                                                 ", but input 0 has " + s.to_string() +
                                                 " (AddN does not broadcast)");
                   s = *m;
                 }
                 c.set_output(0, s);
                 return {};
               }));
}

/// MatMul, its fused form and the fused element-wise node.
void add_matmul_ops(op_registry& reg) {
  add(reg, op_def("MatMul")
               .input("a", "T")
               .input("b", "T")
               .output("product", "T")
               .type_attr("T", real_types)
               .attr("transpose_a", attr_type::boolean, false)
               .attr("transpose_b", attr_type::boolean, false)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 2));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 2));
                 auto a = c.input_shape(0), b = c.input_shape(1);
                 if (!a.has_known_rank())
                   a = shape::unknown_dims(2);
                 if (!b.has_known_rank())
                   b = shape::unknown_dims(2);
                 bool ta = c.attr<bool>("transpose_a"), tb = c.attr<bool>("transpose_b");
                 int64_t m = a[ta ? 1 : 0], ka = a[ta ? 0 : 1];
                 int64_t kb = b[tb ? 1 : 0], n = b[tb ? 0 : 1];
                 if (ka >= 0 && kb >= 0 && ka != kb)
                   return invalid_argument(
                       "matrix size-incompatible: a is " + c.input_shape(0).to_string() +
                       (ta ? " (transposed)" : "") + ", b is " + c.input_shape(1).to_string() +
                       (tb ? " (transposed)" : "") + ": inner dimensions " + std::to_string(ka) +
                       " and " + std::to_string(kb) + " differ");
                 c.set_output(0, shape{m, n});
                 return {};
               }));
  add(reg, fused_with_bias(reg, "_FusedMatMul", "MatMul"));
  // The graph optimizer's element-wise fusion (ops/optimize/elementwise_fusion.cpp): `ops[i]`
  // reads `operands[2i]` and `operands[2i+1]` (-1: none): below N an input, from N on the
  // result of instruction (operand - N). The last instruction's result is the output, of the
  // broadcast shape of the inputs; `out_shape` is what the fused nodes' last one inferred.
  add(reg, op_def("_FusedElementwise")
               .input_list("inputs", "T", "N")
               .output("y", "T")
               .type_attr("T", {dtype::f32})
               .attr("N", attr_type::integer)
               .attr("ops", attr_type::list_string)
               .attr("operands", attr_type::list_int)
               .attr("out_shape", attr_type::shape)
               .shape_fn([](inference_context& c) -> status {
                 auto ops = c.attr<std::vector<std::string>>("ops");
                 auto args = c.attr<std::vector<int64_t>>("operands");
                 if (ops.empty() || args.size() != 2 * ops.size())
                   return invalid_argument("_FusedElementwise needs two operands per op");
                 c.set_output(0, c.attr<shape>("out_shape"));
                 return {};
               }));
}

/// Reductions, arg-extrema and BatchMatMul.
void add_reduction_ops(op_registry& reg) {
  for (auto n : {"All", "Any"})
    add(reg, op_def(n)
                 .input("input", dtype::boolean)
                 .input("reduction_indices", "Tidx")
                 .output("output", dtype::boolean)
                 .type_attr("Tidx", index_types, dtype::i32)
                 .attr("keep_dims", attr_type::boolean, false)
                 .shape_fn(reduction_shape));
  for (auto n : {"Sum", "Mean", "Max", "Min", "Prod"})
    add(reg, op_def(n)
                 .input("input", "T")
                 .input("reduction_indices", "Tidx")
                 .output("output", "T")
                 .type_attr("T", number_types)
                 .type_attr("Tidx", index_types, dtype::i32)
                 .attr("keep_dims", attr_type::boolean, false)
                 .shape_fn(reduction_shape));
  for (auto n : {"ArgMax", "ArgMin"})
    add(reg, op_def(n)
                 .input("input", "T")
                 .input("dimension", "Tidx")
                 .output("output", "output_type")
                 .type_attr("T", number_types)
                 .type_attr("Tidx", index_types, dtype::i32)
                 .type_attr("output_type", index_types, dtype::i64)
                 .shape_fn([](inference_context& c) -> status {
                   auto& in = c.input_shape(0);
                   auto axis = const_ints(c, 1);
                   if (!in.has_known_rank())
                     return {};
                   if (!axis) {
                     c.set_output(0, shape::unknown_dims(std::max(in.rank() - 1, 0)));
                     return {};
                   }
                   if (axis->size() != 1)
                     return c.input_error(1, "must be a scalar");
                   int64_t a = (*axis)[0];
                   RUNNEL_RETURN_IF_ERROR(normalize_axis(a, in.rank(), "dimension"));
                   std::vector<int64_t> out;
                   for (int i = 0; i < in.rank(); ++i)
                     if (i != a)
                       out.push_back(in[i]);
                   c.set_output(0, shape(out));
                   return {};
                 }));
  add(reg, op_def("BatchMatMul")
               .input("x", "T")
               .input("y", "T")
               .output("output", "T")
               .type_attr("T", real_types)
               .attr("adj_x", attr_type::boolean, false)
               .attr("adj_y", attr_type::boolean, false)
               .shape_fn([](inference_context& c) -> status {
                 auto& a = c.input_shape(0);
                 auto& b = c.input_shape(1);
                 RUNNEL_RETURN_IF_ERROR(c.require_rank_at_least(0, 2));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank_at_least(1, 2));
                 if (!a.has_known_rank() || !b.has_known_rank())
                   return {};
                 if (a.rank() != b.rank())
                   return invalid_argument("x " + a.to_string() + " and y " + b.to_string() +
                                           " must have the same rank");
                 int r = a.rank();
                 bool ax = c.attr<bool>("adj_x"), ay = c.attr<bool>("adj_y");
                 int64_t m = a[ax ? r - 1 : r - 2], ka = a[ax ? r - 2 : r - 1];
                 int64_t kb = b[ay ? r - 1 : r - 2], n = b[ay ? r - 2 : r - 1];
                 if (ka >= 0 && kb >= 0 && ka != kb)
                   return invalid_argument("x " + a.to_string() + " and y " + b.to_string() +
                                           " have inner dimensions " + std::to_string(ka) +
                                           " and " + std::to_string(kb));
                 std::vector<int64_t> out;
                 for (int d = 0; d < r - 2; ++d) {
                   if (a[d] >= 0 && b[d] >= 0 && a[d] != b[d])
                     return invalid_argument("batch dimensions of " + a.to_string() + " and " +
                                             b.to_string() + " differ");
                   out.push_back(a[d] >= 0 ? a[d] : b[d]);
                 }
                 out.push_back(m);
                 out.push_back(n);
                 c.set_output(0, shape(out));
                 return {};
               }));
}

} // namespace

RUNNEL_OP_FAMILY(math) {
  add_binary_ops(reg);
  add_unary_ops(reg);
  add_matmul_ops(reg);
  add_reduction_ops(reg);
}

} // namespace runnel
