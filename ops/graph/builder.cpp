#include "runnel/ops/graph/builder.hpp"

#include "runnel/ops/core/binary_ops.hpp"
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/graph/builder_util.hpp"

namespace runnel {

using namespace builder_util;

output constant(graph& g, const tensor& value, std::string_view name) {
  if (!value.valid())
    throw error(invalid_argument("constant: the tensor is empty"));
  return one(g, "Const", name.empty() ? "Const" : name, {},
             {{"value", value}, {"dtype", value.type()}});
}

output filled(graph& g, dtype t, const shape& s, double value, std::string_view name) {
  tensor v(t, s);
  dispatch(t, [&]<class T>() {
    if constexpr (std::is_same_v<T, std::string>)
      throw error(invalid_argument("filled: cannot fill strings with a number"));
    else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
      std::fill_n(v.data<T>(), v.num_elements(), T(float(value)));
    else
      std::fill_n(v.data<T>(), v.num_elements(), T(value));
  });
  return constant(g, v, name);
}
output zeros(graph& g, dtype t, const shape& s, std::string_view name) {
  return filled(g, t, s, 0.0, name.empty() ? "zeros" : name);
}
output ones(graph& g, dtype t, const shape& s, std::string_view name) {
  return filled(g, t, s, 1.0, name.empty() ? "ones" : name);
}

output placeholder(graph& g, dtype t, const shape& s, std::string_view name) {
  return one(g, "Placeholder", name, {}, {{"dtype", t}, {"shape", s}});
}

graph_variable variable(graph& g, dtype t, const shape& s, std::string_view name, bool trainable) {
  graph_variable v;
  v.ref = one(g, "VariableV2", name.empty() ? "Variable" : name, {}, {{"dtype", t}, {"shape", s}});
  // The variable's own name, from the root: its name already holds the enclosing scopes
  // ("layer/w" -> "layer/w/read", not "layer/layer/w/read").
  auto root = g.name_scope("");
  auto scope = g.name_scope(v.ref.node().name);
  auto col = g.colocate_with(v.ref); // the read lives with the variable, whatever the scope
  v.value = one(g, "Identity", "read", {v.ref.ep()});
  g.add_to_collection("variables", v.ref.node_id());
  if (trainable)
    g.add_to_collection("trainable_variables", v.ref.node_id());
  return v;
}

graph_variable local_variable(graph& g, dtype t, const shape& s, std::string_view name) {
  graph_variable v;
  v.ref = one(g, "VariableV2", name.empty() ? "Variable" : name, {}, {{"dtype", t}, {"shape", s}});
  // The variable's own name, from the root: its name already holds the enclosing scopes
  // ("layer/w" -> "layer/w/read", not "layer/layer/w/read").
  auto root = g.name_scope("");
  auto scope = g.name_scope(v.ref.node().name);
  auto col = g.colocate_with(v.ref);
  v.value = one(g, "Identity", "read", {v.ref.ep()});
  g.add_to_collection("local_variables", v.ref.node_id());
  return v;
}

graph_variable variable(graph& g, output initial_value, std::string_view name, bool trainable) {
  if (!initial_value.shape().is_fully_defined())
    throw error(invalid_argument(
        "variable '" + std::string(name) + "': the initial value '" + initial_value.name() +
        "' has shape " + initial_value.shape().to_string() + ", which must be fully defined"));
  // The initializer must not inherit control dependencies from an enclosing scope.
  auto no_deps = g.control_dependencies({});
  graph_variable v = variable(g, initial_value.type(), initial_value.shape(), name, trainable);
  // The variable's own name, from the root: its name already holds the enclosing scopes
  // ("layer/w" -> "layer/w/read", not "layer/layer/w/read").
  auto root = g.name_scope("");
  auto scope = g.name_scope(v.ref.node().name);
  auto col = g.colocate_with(v.ref);
  v.initializer = one(g, "Assign", "Assign", {v.ref.ep(), initial_value.ep()});
  g.add_to_collection("initializers", v.initializer.node_id());
  return v;
}

// Updates live with their variable (device scopes and functions do not move them).
output assign(const graph_variable& v, output value, std::string_view name) {
  auto col = same_graph(v.ref, value).colocate_with(v.ref);
  return one(same_graph(v.ref, value), "Assign", name, {v.ref.ep(), value.ep()});
}
output assign_add(const graph_variable& v, output value, std::string_view name) {
  auto col = same_graph(v.ref, value).colocate_with(v.ref);
  return one(same_graph(v.ref, value), "AssignAdd", name, {v.ref.ep(), value.ep()});
}
output assign_sub(const graph_variable& v, output value, std::string_view name) {
  auto col = same_graph(v.ref, value).colocate_with(v.ref);
  return one(same_graph(v.ref, value), "AssignSub", name, {v.ref.ep(), value.ep()});
}

operation group(graph& g, const std::vector<operation>& ops, std::string_view name) {
  auto deps = g.control_dependencies(ops);
  int id = g.add_op("NoOp", name.empty() ? "group_deps" : name, {}).value();
  return operation(&g, id);
}

operation no_op(graph& g, std::string_view name) {
  return operation(&g, g.add_op("NoOp", name, {}).value());
}

operation global_variables_initializer(graph& g) {
  std::vector<operation> ops;
  for (int id : g.collection("initializers"))
    ops.emplace_back(&g, id);
  return group(g, ops, "init");
}

output add(output a, output b, std::string_view name) {
  return binary("Add", a, b, name);
}
output sub(output a, output b, std::string_view name) {
  return binary("Sub", a, b, name);
}
output mul(output a, output b, std::string_view name) {
  return binary("Mul", a, b, name);
}
output div(output a, output b, std::string_view name) {
  return binary("Div", a, b, name);
}
output pow(output a, output b, std::string_view name) {
  return binary("Pow", a, b, name);
}
output maximum(output a, output b, std::string_view name) {
  return binary("Maximum", a, b, name);
}
output minimum(output a, output b, std::string_view name) {
  return binary("Minimum", a, b, name);
}
output greater(output a, output b, std::string_view name) {
  return binary("Greater", a, b, name);
}
output less(output a, output b, std::string_view name) {
  return binary("Less", a, b, name);
}
output equal(output a, output b, std::string_view name) {
  return binary("Equal", a, b, name);
}
output apply_unary(unary_op op, output x, std::string_view name) {
  return unary(unary_ops[size_t(op)].name, x, name);
}
output apply_binary(binary_op op, output a, output b, std::string_view name) {
  return binary(binary_ops[size_t(op)].name, a, b, name);
}
output neg(output x, std::string_view name) {
  return unary("Neg", x, name);
}
output exp(output x, std::string_view name) {
  return unary("Exp", x, name);
}
output log(output x, std::string_view name) {
  return unary("Log", x, name);
}
output sqrt(output x, std::string_view name) {
  return unary("Sqrt", x, name);
}
output square(output x, std::string_view name) {
  return unary("Square", x, name);
}
output tanh(output x, std::string_view name) {
  return unary("Tanh", x, name);
}
output sigmoid(output x, std::string_view name) {
  return unary("Sigmoid", x, name);
}
output relu(output x, std::string_view name) {
  return unary("Relu", x, name);
}
output cast(output x, dtype to, std::string_view name) {
  return one(x.owner(), "Cast", name, {x.ep()}, {{"DstT", to}});
}
output floor_div(output a, output b, std::string_view name) {
  return binary("FloorDiv", a, b, name);
}
output floor_mod(output a, output b, std::string_view name) {
  return binary("FloorMod", a, b, name);
}
output squared_difference(output a, output b, std::string_view name) {
  return binary("SquaredDifference", a, b, name);
}
output greater_equal(output a, output b, std::string_view name) {
  return binary("GreaterEqual", a, b, name);
}
output less_equal(output a, output b, std::string_view name) {
  return binary("LessEqual", a, b, name);
}
output not_equal(output a, output b, std::string_view name) {
  return binary("NotEqual", a, b, name);
}
output logical_and(output a, output b, std::string_view name) {
  return binary("LogicalAnd", a, b, name);
}
output logical_or(output a, output b, std::string_view name) {
  return binary("LogicalOr", a, b, name);
}
output logical_not(output x, std::string_view name) {
  return unary("LogicalNot", x, name);
}
output select(output condition, output t, output e, std::string_view name) {
  same_graph(condition, t);
  return one(same_graph(t, e), "Select", name, {condition.ep(), t.ep(), e.ep()});
}
output abs(output x, std::string_view name) {
  return unary("Abs", x, name);
}
output sign(output x, std::string_view name) {
  return unary("Sign", x, name);
}
output log1p(output x, std::string_view name) {
  return unary("Log1p", x, name);
}
output rsqrt(output x, std::string_view name) {
  return unary("Rsqrt", x, name);
}
output reciprocal(output x, std::string_view name) {
  return unary("Reciprocal", x, name);
}
output sin(output x, std::string_view name) {
  return unary("Sin", x, name);
}
output cos(output x, std::string_view name) {
  return unary("Cos", x, name);
}
output relu6(output x, std::string_view name) {
  return unary("Relu6", x, name);
}
output elu(output x, std::string_view name) {
  return unary("Elu", x, name);
}
output softplus(output x, std::string_view name) {
  return unary("Softplus", x, name);
}
output stop_gradient(output x, std::string_view name) {
  return unary("StopGradient", x, name);
}

output add_n(const std::vector<output>& xs, std::string_view name) {
  if (xs.empty())
    throw error(invalid_argument("add_n needs at least one input"));
  std::vector<endpoint> in;
  for (auto& x : xs)
    in.push_back(x.ep());
  return one(xs[0].owner(), "AddN", name, in, {{"N", int64_t(xs.size())}});
}

output operator+(output a, output b) {
  return add(a, b);
}
output operator-(output a, output b) {
  return sub(a, b);
}
output operator*(output a, output b) {
  return mul(a, b);
}
output operator/(output a, output b) {
  return div(a, b);
}
output operator-(output a) {
  return neg(a);
}
output operator+(output a, double b) {
  return add(a, scalar_like(a, b));
}
output operator+(double a, output b) {
  return add(scalar_like(b, a), b);
}
output operator-(output a, double b) {
  return sub(a, scalar_like(a, b));
}
output operator-(double a, output b) {
  return sub(scalar_like(b, a), b);
}
output operator*(output a, double b) {
  return mul(a, scalar_like(a, b));
}
output operator*(double a, output b) {
  return mul(scalar_like(b, a), b);
}
output operator/(output a, double b) {
  return div(a, scalar_like(a, b));
}
output operator/(double a, output b) {
  return div(scalar_like(b, a), b);
}

} // namespace runnel
