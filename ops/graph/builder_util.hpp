#pragma once
// What the builder functions' files (builder.cpp, builder_array.cpp) share: building one node,
// binary and unary ops, integer vectors, scalars of a tensor's dtype, random ops, reductions.
// Private to ops/graph/.
#include <string_view>
#include <vector>

#include "runnel/ops/graph/builder.hpp"

namespace runnel::builder_util {

inline constexpr int64_t default_graph_seed = 87654321; // TensorFlow's DEFAULT_GRAPH_SEED

inline output one(graph& g, std::string_view op, std::string_view name, std::vector<endpoint> in,
           attr_map attrs = {}) {
  return g.build(op, name, in, std::move(attrs))[0];
}

inline graph& same_graph(output a, output b) {
  if (&a.owner() != &b.owner())
    throw error(
        invalid_argument("'" + a.name() + "' and '" + b.name() + "' belong to different graphs"));
  return a.owner();
}

inline output binary(std::string_view op, output a, output b, std::string_view name) {
  return one(same_graph(a, b), op, name, {a.ep(), b.ep()});
}

inline output unary(std::string_view op, output x, std::string_view name) {
  return one(x.owner(), op, name, {x.ep()});
}

inline output int_vector(graph& g, const std::vector<int64_t>& v, std::string_view name) {
  std::vector<int32_t> v32(v.begin(), v.end());
  return constant(g, tensor::vector<int32_t>(v32), name);
}

inline output scalar_like(output like, double v) {
  tensor t(like.type(), shape{});
  dispatch(like.type(), [&]<class T>() {
    if constexpr (std::is_same_v<T, std::string>)
      throw error(
          invalid_argument("cannot combine string tensor '" + like.name() + "' with a number"));
    else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
      *t.data<T>() = T(float(v));
    else
      *t.data<T>() = T(v);
  });
  return constant(like.owner(), t);
}


inline output random_op(std::string_view op, graph& g, const shape& s, dtype t, int64_t seed,
                 std::string_view name) {
  if (!s.is_fully_defined())
    throw error(
        invalid_argument(std::string(op) + ": shape " + s.to_string() + " must be fully defined"));
  auto [s1, s2] = seeds(g, seed);
  auto scope = g.name_scope(name.empty() ? op : name);
  auto dims = int_vector(g, s.dims(), "shape");
  return one(g, op, op, {dims.ep()}, {{"dtype", t}, {"seed", s1}, {"seed2", s2}});
}

inline output reduction(std::string_view op, output x, std::vector<int64_t> axes, bool keep_dims,
                 std::string_view name) {
  graph& g = x.owner();
  if (axes.empty()) {
    if (!x.shape().has_known_rank())
      throw error(invalid_argument(std::string(op) + " over all axes of '" + x.name() +
                                   "' needs a known rank"));
    for (int i = 0; i < x.shape().rank(); ++i)
      axes.push_back(i);
  }
  auto ax = int_vector(g, axes, std::string(name.empty() ? op : name) + "/reduction_indices");
  return one(g, op, name, {x.ep(), ax.ep()}, {{"keep_dims", keep_dims}});
}

} // namespace runnel::builder_util
