#include "runnel/ops/graph/op_def.hpp"

#include <algorithm>

namespace runnel {

op_def& op_def::input(std::string arg, std::string type_attr, bool is_ref) {
  inputs.push_back({std::move(arg), dtype::invalid, std::move(type_attr), {}, is_ref, {}});
  return *this;
}
op_def& op_def::input(std::string arg, dtype fixed) {
  inputs.push_back({std::move(arg), fixed, {}, {}, false, {}});
  return *this;
}
op_def& op_def::input_list(std::string arg, std::string type_attr, std::string number_attr) {
  inputs.push_back({std::move(arg), dtype::invalid, std::move(type_attr), std::move(number_attr), false, {}});
  return *this;
}
op_def& op_def::output(std::string arg, std::string type_attr) {
  outputs.push_back({std::move(arg), dtype::invalid, std::move(type_attr), {}, false, {}});
  return *this;
}
op_def& op_def::output(std::string arg, dtype fixed) {
  outputs.push_back({std::move(arg), fixed, {}, {}, false, {}});
  return *this;
}
op_def& op_def::output_list(std::string arg, std::string type_attr, std::string number_attr) {
  outputs.push_back({std::move(arg), dtype::invalid, std::move(type_attr), std::move(number_attr), false, {}});
  return *this;
}
op_def& op_def::input_list(std::string arg, dtype fixed, std::string number_attr) {
  inputs.push_back({std::move(arg), fixed, {}, std::move(number_attr), false, {}});
  return *this;
}
op_def& op_def::output_list(std::string arg, dtype fixed, std::string number_attr) {
  outputs.push_back({std::move(arg), fixed, {}, std::move(number_attr), false, {}});
  return *this;
}
op_def& op_def::input_type_list(std::string arg, std::string types_attr) {
  arg_def a{std::move(arg), dtype::invalid, {}, {}, false, {}};
  a.type_list_attr = std::move(types_attr);
  inputs.push_back(std::move(a));
  return *this;
}
op_def& op_def::output_type_list(std::string arg, std::string types_attr) {
  arg_def a{std::move(arg), dtype::invalid, {}, {}, false, {}};
  a.type_list_attr = std::move(types_attr);
  outputs.push_back(std::move(a));
  return *this;
}

int64_t arg_def::count(const attr_map& attrs) const {
  if (!type_list_attr.empty())
    return int64_t(get_attr<std::vector<dtype>>(attrs, type_list_attr).size());
  return number_attr.empty() ? 1 : get_attr<int64_t>(attrs, number_attr);
}

op_def& op_def::type_attr(std::string attr_name, std::vector<dtype> allowed) {
  attrs.push_back({std::move(attr_name), attr_type::type, {}, std::move(allowed)});
  return *this;
}
op_def& op_def::type_attr(std::string attr_name, std::vector<dtype> allowed, dtype default_type) {
  attrs.push_back(
      {std::move(attr_name), attr_type::type, attr_value(default_type), std::move(allowed)});
  return *this;
}
op_def& op_def::attr(std::string attr_name, attr_type type, std::optional<attr_value> def) {
  attrs.push_back({std::move(attr_name), type, std::move(def), {}});
  return *this;
}
op_def& op_def::set_stateful() {
  stateful = true;
  return *this;
}
op_def& op_def::shape_fn(shape_function fn) {
  infer_shapes = std::move(fn);
  return *this;
}

const attr_def* op_def::find_attr_def(std::string_view attr_name) const {
  for (auto& a : attrs)
    if (a.name == attr_name)
      return &a;
  return nullptr;
}

inference_context::inference_context(const std::string& node_name, const op_def& def,
                                     const attr_map& attrs, std::vector<dtype> input_types,
                                     std::vector<shape> input_shapes,
                                     std::vector<const tensor*> input_constants, size_t num_outputs)
    : node_name_(node_name), def_(def), attrs_(attrs), input_types_(std::move(input_types)),
      input_shapes_(std::move(input_shapes)), input_constants_(std::move(input_constants)),
      output_shapes_(num_outputs, shape::unknown()) {}

status inference_context::input_error(int i, const std::string& what) const {
  // Map the flat input index to its argument name when the op has no list inputs before it.
  std::string arg = i < int(def_.inputs.size()) ? def_.inputs[size_t(i)].name : "";
  return invalid_argument("input " + std::to_string(i) + (arg.empty() ? "" : " ('" + arg + "')") +
                          " " + what);
}

status inference_context::require_rank(int i, int rank) const {
  auto& s = input_shape(i);
  if (s.has_known_rank() && s.rank() != rank)
    return input_error(i, "must have rank " + std::to_string(rank) + ", but has shape " +
                              s.to_string());
  return {};
}

status inference_context::require_rank_at_least(int i, int rank) const {
  auto& s = input_shape(i);
  if (s.has_known_rank() && s.rank() < rank)
    return input_error(i, "must have rank at least " + std::to_string(rank) + ", but has shape " +
                              s.to_string());
  return {};
}

shape_function same_shape_as_input(int i) {
  return [i](inference_context& c) {
    for (int o = 0; o < c.num_outputs(); ++o)
      c.set_output(o, c.input_shape(i));
    return ok_status();
  };
}

status broadcast_binary_shape(inference_context& c) {
  RUNNEL_ASSIGN_OR_RETURN(auto s, broadcast_shapes(c.input_shape(0), c.input_shape(1)));
  c.set_output(0, std::move(s));
  return {};
}

status scalar_shape(inference_context& c) {
  for (int o = 0; o < c.num_outputs(); ++o)
    c.set_output(o, shape{});
  return {};
}

status unknown_shape(inference_context&) {
  return {};
}

result<std::pair<int64_t, int64_t>> conv_output_size(int64_t in, int64_t k, int64_t stride,
                                                     const std::string& padding) {
  if (stride < 1 || k < 1)
    return invalid_argument("window size and stride must be positive");
  if (padding == "VALID") {
    if (in < k)
      return invalid_argument("input size " + std::to_string(in) + " is smaller than the window " +
                              std::to_string(k) + " (VALID padding)");
    return std::pair<int64_t, int64_t>{(in - k) / stride + 1, 0};
  }
  if (padding == "SAME") {
    int64_t out = (in + stride - 1) / stride;
    int64_t total = std::max<int64_t>((out - 1) * stride + k - in, 0);
    return std::pair<int64_t, int64_t>{out, total / 2};
  }
  return invalid_argument("padding must be SAME or VALID, got '" + padding + "'");
}

status op_registry::add(op_def def) {
  if (ops_.count(def.name))
    return already_exists("op '" + def.name + "' is already registered");
  auto name = def.name;
  ops_.emplace(std::move(name), std::make_unique<op_def>(std::move(def)));
  return {};
}

const op_def* op_registry::find(std::string_view name) const {
  auto it = ops_.find(std::string(name));
  return it == ops_.end() ? nullptr : it->second.get();
}

result<const op_def*> op_registry::lookup(std::string_view name) const {
  if (auto* d = find(name))
    return d;
  return not_found("unknown op '" + std::string(name) + "'");
}

std::vector<std::string> op_registry::names() const {
  std::vector<std::string> out;
  for (auto& [k, v] : ops_)
    out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace runnel
