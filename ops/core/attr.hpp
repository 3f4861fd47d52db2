#pragma once
// Attribute values on graph nodes: `transpose_a = true`, `T = float32`, `value = <tensor>`.
//
//   attr_map attrs{{"transpose_a", true}, {"T", dtype::f32}};
//   bool ta = get_attr<bool>(attrs, "transpose_a");

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "runnel/ops/core/dtype.hpp"
#include "runnel/ops/core/shape.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel {

/// The kinds of attribute an op can declare.
enum class attr_type {
  integer,
  real,
  boolean,
  string,
  type,
  shape,
  tensor,
  list_int,
  list_real,
  list_type,
  list_string,
  list_shape
};
const char* to_string(attr_type t);

/// One attribute value. Integers are int64, reals double.
using attr_value = std::variant<int64_t, double, bool, std::string, dtype, shape, tensor,
                                std::vector<int64_t>, std::vector<double>, std::vector<dtype>,
                                std::vector<std::string>, std::vector<shape>>;

/// The attr_type a value holds.
attr_type type_of(const attr_value& v);
/// A readable rendering: `true`, `float32`, `[2,3]`, `[1, 2]`, `float32[2] [1, 2]`.
std::string attr_to_string(const attr_value& v);

/// Attributes by name, sorted so that dumps are deterministic.
using attr_map = std::map<std::string, attr_value, std::less<>>;

/// The attribute `name` as T, or an error naming it.
template <class T> result<T> find_attr(const attr_map& attrs, std::string_view name) {
  auto it = attrs.find(name);
  if (it == attrs.end())
    return not_found("missing attribute '" + std::string(name) + "'");
  if (auto* v = std::get_if<T>(&it->second))
    return *v;
  return invalid_argument("attribute '" + std::string(name) + "' has type " +
                          to_string(type_of(it->second)));
}

/// Like find_attr but throws runnel::error; for attributes the op definition guarantees.
template <class T> T get_attr(const attr_map& attrs, std::string_view name) {
  return find_attr<T>(attrs, name).value();
}

} // namespace runnel
