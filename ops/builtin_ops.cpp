// Definitions of the builtin ops: argument types, attributes and shape inference. Kernels live
// in ops/cpu/ and are registered separately (ops/builtin_kernels.cpp).
#include <algorithm>

#include "runnel/ops/op_def.hpp"

namespace runnel {
namespace {

// Compute ops take the 16-bit floats too (ops/cpu/reduced_precision.cpp); state, random and
// linear-algebra ops keep 32- and 64-bit floats (master weights stay float32).
const std::vector<dtype> real_types{dtype::f16, dtype::bf16, dtype::f32, dtype::f64};
const std::vector<dtype> number_types{dtype::f16, dtype::bf16, dtype::f32,
                                      dtype::f64, dtype::i32,  dtype::i64};
const std::vector<dtype> wide_real_types{dtype::f32, dtype::f64};
const std::vector<dtype> wide_number_types{dtype::f32, dtype::f64, dtype::i32, dtype::i64};
const std::vector<dtype> index_types{dtype::i32, dtype::i64};
const std::vector<dtype> all_types{dtype::f16,     dtype::bf16,  dtype::f32, dtype::f64,
                                   dtype::i8,      dtype::u8,    dtype::i32, dtype::i64,
                                   dtype::boolean, dtype::string};
const std::vector<dtype> castable_types{dtype::f16, dtype::bf16, dtype::f32,
                                        dtype::f64, dtype::i8,   dtype::u8,
                                        dtype::i32, dtype::i64,  dtype::boolean};

void add(op_registry& reg, op_def def) {
  throw_if_error(reg.add(std::move(def)));
}

/// Reads a constant integer vector input for shape inference; nullopt if not constant.
std::optional<std::vector<int64_t>> const_ints(const inference_context& c, int i) {
  auto* t = c.input_constant(i);
  if (!t)
    return std::nullopt;
  auto v = to_int64_vector(*t);
  if (!v)
    return std::nullopt;
  return *v;
}

status normalize_axis(int64_t& axis, int rank, const std::string& what) {
  if (axis < -rank || axis >= std::max(rank, 1))
    return invalid_argument(what + " " + std::to_string(axis) + " is out of range for rank " +
                            std::to_string(rank));
  if (axis < 0)
    axis += rank;
  return {};
}

status reduction_shape(inference_context& c) {
  auto& in = c.input_shape(0);
  bool keep = c.attr<bool>("keep_dims");
  auto axes = const_ints(c, 1);
  if (!in.has_known_rank())
    return {};
  if (!axes) {
    if (keep)
      c.set_output(0, shape::unknown_dims(in.rank()));
    return {};
  }
  std::vector<bool> reduce(static_cast<size_t>(in.rank()), false);
  for (auto a : *axes) {
    RUNNEL_RETURN_IF_ERROR(normalize_axis(a, in.rank(), "reduction axis"));
    reduce[size_t(a)] = true;
  }
  std::vector<int64_t> out;
  for (int i = 0; i < in.rank(); ++i) {
    if (!reduce[size_t(i)])
      out.push_back(in[i]);
    else if (keep)
      out.push_back(1);
  }
  c.set_output(0, shape(out));
  return {};
}

op_def binary(std::string name, const std::vector<dtype>& types) {
  return op_def(std::move(name))
      .input("x", "T")
      .input("y", "T")
      .output("z", "T")
      .type_attr("T", types)
      .shape_fn(broadcast_binary_shape);
}

op_def comparison(std::string name, const std::vector<dtype>& types) {
  return op_def(std::move(name))
      .input("x", "T")
      .input("y", "T")
      .output("z", dtype::boolean)
      .type_attr("T", types)
      .shape_fn(broadcast_binary_shape);
}

op_def unary(std::string name, const std::vector<dtype>& types) {
  return op_def(std::move(name))
      .input("x", "T")
      .output("y", "T")
      .type_attr("T", types)
      .shape_fn(same_shape_as_input(0));
}

/// Output shape from a constant shape-vector input `i` (unknown dims where not constant).
status shape_from_input(inference_context& c, int i) {
  if (auto dims = const_ints(c, i)) {
    for (auto d : *dims)
      if (d < 0)
        return c.input_error(i, "holds a negative dimension " + std::to_string(d));
    c.set_output(0, shape(*dims));
  } else if (c.input_shape(i).rank() == 1 && c.input_shape(i)[0] >= 0) {
    c.set_output(0, shape::unknown_dims(int(c.input_shape(i)[0])));
  }
  return {};
}

} // namespace

void register_math_ops(op_registry& reg) {
  for (auto n : {"Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Pow", "FloorDiv", "FloorMod",
                 "Mod", "SquaredDifference"})
    add(reg, binary(n, number_types));
  for (auto n : {"Greater", "Less", "GreaterEqual", "LessEqual"})
    add(reg, comparison(n, number_types));
  for (auto n : {"Equal", "NotEqual"})
    add(reg, comparison(n, {dtype::f32, dtype::f64, dtype::i32, dtype::i64, dtype::boolean,
                            dtype::string}));
  for (auto n : {"LogicalAnd", "LogicalOr"})
    add(reg, op_def(n)
                 .input("x", dtype::boolean)
                 .input("y", dtype::boolean)
                 .output("z", dtype::boolean)
                 .shape_fn(broadcast_binary_shape));
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
  for (auto n : {"Neg", "Square", "Abs", "Sign", "Relu6"})
    add(reg, unary(n, number_types));
  for (auto n : {"Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "Log1p", "Rsqrt", "Reciprocal", "Sin",
                 "Cos", "Elu", "Softplus"})
    add(reg, unary(n, real_types));
  // Gradient helpers, in TensorFlow's argument order.
  for (auto n : {"ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad", "SigmoidGrad", "TanhGrad",
                 "SqrtGrad", "RsqrtGrad", "ReciprocalGrad"})
    add(reg, binary(n, real_types));
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
}

void register_array_ops(op_registry& reg) {
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

void register_nn_ops(op_registry& reg) {
  add(reg, unary("Relu", number_types));
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
}

void register_random_ops(op_registry& reg) {
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
}

void register_state_ops(op_registry& reg) {
  add(reg, op_def("VariableV2")
               .output("ref", "dtype")
               .attr("shape", attr_type::shape)
               .type_attr("dtype", castable_types)
               .attr("container", attr_type::string, std::string())
               .attr("shared_name", attr_type::string, std::string())
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, c.attr<shape>("shape"));
                 return {};
               }));
  auto assign_shape = [](inference_context& c) -> status {
    bool validate = c.attrs().count("validate_shape") ? c.attr<bool>("validate_shape") : true;
    if (validate && !c.input_shape(0).is_compatible_with(c.input_shape(1)))
      return invalid_argument("the variable has shape " + c.input_shape(0).to_string() +
                              " but the value has shape " + c.input_shape(1).to_string());
    c.set_output(0, validate ? c.input_shape(0) : c.input_shape(1));
    return {};
  };
  add(reg, op_def("Assign")
               .input("ref", "T", /*is_ref=*/true)
               .input("value", "T")
               .output("output_ref", "T")
               .type_attr("T", castable_types)
               .attr("validate_shape", attr_type::boolean, true)
               .attr("use_locking", attr_type::boolean, true)
               .set_stateful()
               .shape_fn(assign_shape));
  for (auto n : {"AssignAdd", "AssignSub"})
    add(reg, op_def(n)
                 .input("ref", "T", /*is_ref=*/true)
                 .input("value", "T")
                 .output("output_ref", "T")
                 .type_attr("T", wide_number_types)
                 .attr("use_locking", attr_type::boolean, false)
                 .set_stateful()
                 .shape_fn(assign_shape));
}

} // namespace runnel

namespace runnel {

void register_gradient_support_ops(op_registry& reg) {
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
                 auto dims = in.dims();
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

} // namespace runnel

namespace runnel {

void register_training_ops(op_registry& reg) {
  add(reg, unary("Floor", real_types));
  auto apply_shape = [](int grad_input) {
    return [grad_input](inference_context& c) -> status {
      if (!c.input_shape(0).is_compatible_with(c.input_shape(grad_input)))
        return invalid_argument("the variable has shape " + c.input_shape(0).to_string() +
                                " but the gradient has shape " +
                                c.input_shape(grad_input).to_string());
      for (int i = 1; i < c.num_inputs(); ++i) {
        bool is_ref = c.def().inputs[size_t(i)].is_ref;
        if (i == grad_input)
          continue;
        if (is_ref) {
          if (!c.input_shape(0).is_compatible_with(c.input_shape(i)))
            return c.input_error(i, "(a slot) has shape " + c.input_shape(i).to_string() +
                                        " but the variable has " + c.input_shape(0).to_string());
        } else if (c.input_shape(i).has_known_rank() && c.input_shape(i).rank() != 0) {
          return c.input_error(i, "must be a scalar, got shape " + c.input_shape(i).to_string());
        }
      }
      c.set_output(0, c.input_shape(0));
      return {};
    };
  };
  auto apply = [](const char* name) {
    return op_def(name).output("out", "T").type_attr("T", wide_real_types).set_stateful();
  };
  add(reg, apply("ApplyGradientDescent")
               .input("var", "T", true)
               .input("alpha", "T")
               .input("delta", "T")
               .attr("use_locking", attr_type::boolean, false)
               .shape_fn(apply_shape(2)));
  add(reg, apply("ApplyMomentum")
               .input("var", "T", true)
               .input("accum", "T", true)
               .input("lr", "T")
               .input("grad", "T")
               .input("momentum", "T")
               .attr("use_locking", attr_type::boolean, false)
               .attr("use_nesterov", attr_type::boolean, false)
               .shape_fn(apply_shape(3)));
  add(reg, apply("ApplyAdagrad")
               .input("var", "T", true)
               .input("accum", "T", true)
               .input("lr", "T")
               .input("grad", "T")
               .attr("use_locking", attr_type::boolean, false)
               .shape_fn(apply_shape(3)));
  add(reg, apply("ApplyRMSProp")
               .input("var", "T", true)
               .input("ms", "T", true)
               .input("mom", "T", true)
               .input("lr", "T")
               .input("rho", "T")
               .input("momentum", "T")
               .input("epsilon", "T")
               .input("grad", "T")
               .attr("use_locking", attr_type::boolean, false)
               .shape_fn(apply_shape(7)));
  add(reg, apply("ApplyAdam")
               .input("var", "T", true)
               .input("m", "T", true)
               .input("v", "T", true)
               .input("beta1_power", "T")
               .input("beta2_power", "T")
               .input("lr", "T")
               .input("beta1", "T")
               .input("beta2", "T")
               .input("epsilon", "T")
               .input("grad", "T")
               .attr("use_locking", attr_type::boolean, false)
               .attr("use_nesterov", attr_type::boolean, false)
               .shape_fn(apply_shape(9)));
}

} // namespace runnel

namespace runnel {

namespace {

/// Shape of a 2-D convolution or pool output from input [N,H,W,C]; `out_channels` < 0 keeps C.
status spatial_shape(inference_context& c, const shape& in, int64_t kh, int64_t kw,
                     int64_t out_channels) {
  if (!in.has_known_rank())
    return {};
  if (in.rank() != 4)
    return c.input_error(0, "must be 4-D (NHWC), got shape " + in.to_string());
  auto strides = c.attr<std::vector<int64_t>>("strides");
  if (strides.size() != 4 || strides[0] != 1 || strides[3] != 1)
    return invalid_argument("strides must be [1, sh, sw, 1], got " + shape(strides).to_string());
  auto padding = c.attr<std::string>("padding");
  auto dim = [&](int64_t size, int64_t k, int64_t s) -> result<int64_t> {
    if (size < 0 || k < 0)
      return int64_t(-1);
    RUNNEL_ASSIGN_OR_RETURN(auto r, conv_output_size(size, k, s, padding));
    return r.first;
  };
  RUNNEL_ASSIGN_OR_RETURN(int64_t oh, dim(in[1], kh, strides[1]));
  RUNNEL_ASSIGN_OR_RETURN(int64_t ow, dim(in[2], kw, strides[2]));
  c.set_output(0, shape{in[0], oh, ow, out_channels < 0 ? in[3] : out_channels});
  return {};
}

op_def& conv_attrs(op_def& d) {
  return d.attr("strides", attr_type::list_int)
      .attr("padding", attr_type::string)
      .attr("data_format", attr_type::string, std::string("NHWC"))
      .attr("dilations", attr_type::list_int, std::vector<int64_t>{1, 1, 1, 1})
      .attr("use_cudnn_on_gpu", attr_type::boolean, true);
}

status check_nhwc(inference_context& c) {
  if (c.attr<std::string>("data_format") != "NHWC")
    return unimplemented("only data_format NHWC is supported");
  if (c.attrs().count("dilations") &&
      c.attr<std::vector<int64_t>>("dilations") != std::vector<int64_t>{1, 1, 1, 1})
    return unimplemented("dilated convolutions are not supported yet");
  return {};
}

op_def pool(const char* name) {
  return op_def(name)
      .attr("ksize", attr_type::list_int)
      .attr("strides", attr_type::list_int)
      .attr("padding", attr_type::string)
      .attr("data_format", attr_type::string, std::string("NHWC"))
      .type_attr("T", {dtype::f16, dtype::bf16, dtype::f32}, dtype::f32);
}

status pool_shape(inference_context& c) {
  RUNNEL_RETURN_IF_ERROR(check_nhwc(c));
  auto k = c.attr<std::vector<int64_t>>("ksize");
  if (k.size() != 4 || k[0] != 1 || k[3] != 1)
    return invalid_argument("ksize must be [1, kh, kw, 1], got " + shape(k).to_string());
  return spatial_shape(c, c.input_shape(0), k[1], k[2], -1);
}

} // namespace

void register_conv_ops(op_registry& reg) {
  auto conv = op_def("Conv2D").input("input", "T").input("filter", "T").output("output", "T");
  conv.type_attr("T", {dtype::f16, dtype::bf16, dtype::f32});
  add(reg, conv_attrs(conv).shape_fn([](inference_context& c) -> status {
    RUNNEL_RETURN_IF_ERROR(check_nhwc(c));
    RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 4));
    auto& in = c.input_shape(0);
    auto& f = c.input_shape(1);
    shape fs = f.has_known_rank() ? f : shape::unknown_dims(4);
    if (in.has_known_rank() && in.rank() == 4 && in[3] >= 0 && fs[2] >= 0 && in[3] != fs[2])
      return invalid_argument("input " + in.to_string() + " has " + std::to_string(in[3]) +
                              " channels but the filter " + f.to_string() + " expects " +
                              std::to_string(fs[2]));
    return spatial_shape(c, in, fs[0], fs[1], fs[3]);
  }));
  auto bi = op_def("Conv2DBackpropInput")
                .input("input_sizes", dtype::i32)
                .input("filter", "T")
                .input("out_backprop", "T")
                .output("output", "T");
  bi.type_attr("T", {dtype::f16, dtype::bf16, dtype::f32});
  add(reg, conv_attrs(bi).shape_fn([](inference_context& c) { return shape_from_input(c, 0); }));
  auto bf = op_def("Conv2DBackpropFilter")
                .input("input", "T")
                .input("filter_sizes", dtype::i32)
                .input("out_backprop", "T")
                .output("output", "T");
  bf.type_attr("T", {dtype::f16, dtype::bf16, dtype::f32});
  add(reg, conv_attrs(bf).shape_fn([](inference_context& c) { return shape_from_input(c, 1); }));
  for (auto n : {"MaxPool", "AvgPool"})
    add(reg, pool(n).input("input", "T").output("output", "T").shape_fn(pool_shape));
  add(reg, pool("MaxPoolGrad")
               .input("orig_input", "T")
               .input("orig_output", "T")
               .input("grad", "T")
               .output("output", "T")
               .shape_fn(same_shape_as_input(0)));
  add(reg, pool("AvgPoolGrad")
               .input("orig_input_shape", dtype::i32)
               .input("grad", "T")
               .output("output", "T")
               .shape_fn([](inference_context& c) { return shape_from_input(c, 0); }));
}

} // namespace runnel

namespace runnel {

void register_more_array_ops(op_registry& reg) {
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
                 auto dims = s.dims();
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
                 auto dims = s.dims();
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
                 auto dims = s.dims();
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
  add(reg, op_def("RandomShuffle")
               .input("value", "T")
               .output("output", "T")
               .type_attr("T", all_types)
               .attr("seed", attr_type::integer, int64_t(0))
               .attr("seed2", attr_type::integer, int64_t(0))
               .set_stateful()
               .shape_fn(same_shape_as_input(0)));
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
  auto square_matrices = [](inference_context& c) -> status {
    auto& s = c.input_shape(0);
    RUNNEL_RETURN_IF_ERROR(c.require_rank_at_least(0, 2));
    if (s.has_known_rank() && s[s.rank() - 1] >= 0 && s[s.rank() - 2] >= 0 &&
        s[s.rank() - 1] != s[s.rank() - 2])
      return c.input_error(0, "must be square matrices, got shape " + s.to_string());
    return {};
  };
  add(reg, op_def("MatrixInverse")
               .input("input", "T")
               .output("output", "T")
               .type_attr("T", wide_real_types)
               .attr("adjoint", attr_type::boolean, false)
               .shape_fn([square_matrices](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(square_matrices(c));
                 c.set_output(0, c.input_shape(0));
                 return {};
               }));
  add(reg, op_def("MatrixDeterminant")
               .input("input", "T")
               .output("output", "T")
               .type_attr("T", wide_real_types)
               .shape_fn([square_matrices](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(square_matrices(c));
                 auto& s = c.input_shape(0);
                 if (s.has_known_rank())
                   c.set_output(0,
                                shape(std::vector<int64_t>(s.dims().begin(), s.dims().end() - 2)));
                 return {};
               }));
}

} // namespace runnel

#include "runnel/ops/strided_slice.hpp"

namespace runnel {

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

} // namespace

void register_strided_slice_ops(op_registry& reg) {
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

} // namespace runnel
