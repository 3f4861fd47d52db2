#pragma once
// What the builtin op definitions of ops/defs/ share: dtype lists, the add() that throws on a
// duplicate, and shape-inference helpers (constant inputs, axes, reductions, element-wise ops).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/graph/op_def.hpp"

namespace runnel::op_defs {

// Compute ops take the 16-bit floats too (ops/cpu/reduced_precision.cpp); state, random and
// linear-algebra ops keep 32- and 64-bit floats (master weights stay float32).
inline const std::vector<dtype> real_types{dtype::f16, dtype::bf16, dtype::f32, dtype::f64};
inline const std::vector<dtype> number_types{dtype::f16, dtype::bf16, dtype::f32,
                                      dtype::f64, dtype::i32,  dtype::i64};
inline const std::vector<dtype> wide_real_types{dtype::f32, dtype::f64};
inline const std::vector<dtype> wide_number_types{dtype::f32, dtype::f64, dtype::i32, dtype::i64};
inline const std::vector<dtype> index_types{dtype::i32, dtype::i64};
inline const std::vector<dtype> all_types{dtype::f16,     dtype::bf16,  dtype::f32, dtype::f64,
                                   dtype::i8,      dtype::u8,    dtype::i32, dtype::i64,
                                   dtype::boolean, dtype::string};
inline const std::vector<dtype> castable_types{dtype::f16, dtype::bf16, dtype::f32,
                                        dtype::f64, dtype::i8,   dtype::u8,
                                        dtype::i32, dtype::i64,  dtype::boolean};

inline void add(op_registry& reg, op_def def) {
  throw_if_error(reg.add(std::move(def)));
}

/// The op `base` (registered already) with a bias added along its output's last dimension and
/// an activation after ("" or one of fused_activations, ops/core/unary_ops.hpp): the ops the graph
/// optimizer's remapping makes (ops/optimize/remap.cpp), kernels in ops/cpu/fused.cpp.
inline op_def fused_with_bias(const op_registry& reg, std::string name, const std::string& base) {
  op_def d = *reg.find(base);
  d.name = std::move(name);
  d.input("bias", "T").attr("activation", attr_type::string, std::string());
  d.shape_fn([inner = d.infer_shapes](inference_context& c) -> status {
    RUNNEL_RETURN_IF_ERROR(inner(c));
    RUNNEL_RETURN_IF_ERROR(c.require_rank(2, 1));
    const shape& out = c.output_shapes()[0];
    const shape& b = c.input_shape(2);
    if (out.has_known_rank() && b.has_known_rank() && out.rank() > 0 &&
        out[out.rank() - 1] >= 0 && b[0] >= 0 && out[out.rank() - 1] != b[0])
      return c.input_error(2, "has " + std::to_string(b[0]) + " elements but the output " +
                                  out.to_string() + " has " +
                                  std::to_string(out[out.rank() - 1]) + " channels");
    auto act = c.attr<std::string>("activation");
    if (!act.empty() && !find_fused_activation(act)) {
      std::string known;
      for (unary_op a : fused_activations)
        known += std::string(unary_ops[int(a)].name) + ", ";
      return invalid_argument("unknown activation '" + act + "' (expected " + known + "or none)");
    }
    return {};
  });
  return d;
}

/// Reads a constant integer vector input for shape inference; nullopt if not constant.
inline std::optional<std::vector<int64_t>> const_ints(const inference_context& c, int i) {
  auto* t = c.input_constant(i);
  if (!t)
    return std::nullopt;
  auto v = to_int64_vector(*t);
  if (!v)
    return std::nullopt;
  return *v;
}

inline status normalize_axis(int64_t& axis, int rank, const std::string& what) {
  if (axis < -rank || axis >= std::max(rank, 1))
    return invalid_argument(what + " " + std::to_string(axis) + " is out of range for rank " +
                            std::to_string(rank));
  if (axis < 0)
    axis += rank;
  return {};
}

inline status reduction_shape(inference_context& c) {
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

inline op_def binary(std::string name, const std::vector<dtype>& types) {
  return op_def(std::move(name))
      .input("x", "T")
      .input("y", "T")
      .output("z", "T")
      .type_attr("T", types)
      .shape_fn(broadcast_binary_shape);
}

inline op_def comparison(std::string name, const std::vector<dtype>& types) {
  return op_def(std::move(name))
      .input("x", "T")
      .input("y", "T")
      .output("z", dtype::boolean)
      .type_attr("T", types)
      .shape_fn(broadcast_binary_shape);
}

inline op_def unary(std::string name, const std::vector<dtype>& types) {
  return op_def(std::move(name))
      .input("x", "T")
      .output("y", "T")
      .type_attr("T", types)
      .shape_fn(same_shape_as_input(0));
}

/// Output shape from a constant shape-vector input `i` (unknown dims where not constant).
inline status shape_from_input(inference_context& c, int i) {
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

/// A scatter's or sparse update's `updates` input must be indices.shape + var.shape[1:].
inline status check_updates_shape(inference_context& c, int var, int indices, int updates) {
  auto& v = c.input_shape(var);
  auto& idx = c.input_shape(indices);
  auto& u = c.input_shape(updates);
  if (!v.has_known_rank() || !idx.has_known_rank() || !u.has_known_rank())
    return {};
  if (v.rank() < 1)
    return c.input_error(var, "must have rank at least 1, got shape " + v.to_string());
  std::vector<int64_t> want(idx.dims());
  want.insert(want.end(), v.dims().begin() + 1, v.dims().end());
  if (!shape(want).is_compatible_with(u))
    return c.input_error(updates, "has shape " + u.to_string() + " but indices " + idx.to_string() +
                                      " and a variable of shape " + v.to_string() + " need " +
                                      shape(want).to_string());
  return {};
}

} // namespace runnel::op_defs
