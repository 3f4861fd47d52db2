// Graphs from Python: Graph, Tensor, Operation, the op definitions (from which runnel/_ops.py
// generates a function per op), a generic node builder, scopes, and the builder functions whose
// logic lives in C++ (variables, reductions, files).
#include <pybind11/stl.h>

#include <optional>

#include "bindings.hpp"
#include "convert.hpp"
#include "runnel/net/graph_def.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

namespace runnel::python {

namespace {

/// A scope entered with `with`: the guard lives from __enter__ to __exit__.
struct py_scope {
  std::function<graph::scope_guard()> make;
  std::optional<graph::scope_guard> guard;
};

py::dict arg_dict(const arg_def& a) {
  py::dict d;
  d["name"] = a.name;
  d["type"] =
      a.fixed == dtype::invalid ? py::object(py::none()) : py::str(std::string(name(a.fixed)));
  d["type_attr"] = a.type_attr;
  d["number_attr"] = a.number_attr;
  d["type_list_attr"] = a.type_list_attr;
  d["is_ref"] = a.is_ref;
  return d;
}

/// Every op definition, for the generated wrappers.
py::list op_defs() {
  py::list out;
  const op_registry& reg = builtin_ops();
  for (const std::string& op_name : reg.names()) {
    const op_def* def = reg.find(op_name);
    py::dict d;
    d["name"] = def->name;
    py::list inputs, outputs, attrs;
    for (auto& a : def->inputs)
      inputs.append(arg_dict(a));
    for (auto& a : def->outputs)
      outputs.append(arg_dict(a));
    for (auto& a : def->attrs) {
      py::dict ad;
      ad["name"] = a.name;
      ad["type"] = std::string(to_string(a.type));
      ad["has_default"] = a.default_value.has_value();
      ad["default"] = a.default_value ? from_attr(*a.default_value) : py::object(py::none());
      attrs.append(ad);
    }
    d["inputs"] = inputs;
    d["outputs"] = outputs;
    d["attrs"] = attrs;
    d["stateful"] = def->stateful;
    out.append(d);
  }
  return out;
}

/// A node of op `op` with flat `inputs` and Python attribute values converted by their declared
/// types; returns its outputs.
std::pair<int, std::vector<py_tensor>> build(const graph_ptr& g, const std::string& op,
                                             const std::string& name,
                                             const std::vector<py_tensor>& inputs,
                                             const py::dict& attrs) {
  const op_def* def = g->ops().find(op);
  if (!def)
    throw py::value_error("no op named '" + op + "'");
  attr_map am;
  for (auto [k, v] : attrs) {
    std::string key = py::str(k);
    const attr_def* ad = def->find_attr_def(key);
    if (!ad)
      throw py::type_error("op " + op + " has no attribute '" + key + "'");
    if (!v.is_none())
      am.emplace(key, to_attr(v, ad->type, key));
  }
  std::vector<endpoint> eps;
  for (auto& t : inputs) {
    if (t.g != g)
      throw py::value_error("input '" + t.o.name() + "' of " + op +
                            " belongs to another graph than the node being built");
    eps.push_back(t.o.ep());
  }
  int id = check(g->add_op(op, name, eps, std::move(am)));
  std::vector<py_tensor> out;
  for (int i = 0; i < g->at(id).num_outputs(); ++i)
    out.push_back({g, output(g.get(), {id, i})});
  return {id, out};
}

py::object scope_object(py_scope scope) {
  return py::cast(std::move(scope));
}

} // namespace

void bind_graph(py::module_& m) {
  py::class_<py_scope>(m, "_Scope")
      .def("__enter__", [](py_scope& s) { s.guard.emplace(s.make()); })
      .def("__exit__", [](py_scope& s, py::args) {
        s.guard.reset();
        return false;
      });

  py::class_<py_tensor>(m, "_Tensor")
      .def_property_readonly(
          "name",
          [](const py_tensor& t) { return t.o.node().name + ":" + std::to_string(t.o.index()); })
      .def_property_readonly("dtype",
                             [](const py_tensor& t) { return std::string(name(t.o.type())); })
      .def_property_readonly("shape", [](const py_tensor& t) { return from_shape(t.o.shape()); })
      .def_property_readonly("value_index", [](const py_tensor& t) { return t.o.index(); })
      .def_property_readonly("op_name", [](const py_tensor& t) { return t.o.node().name; })
      .def_property_readonly("op_type", [](const py_tensor& t) { return t.o.node().op; })
      .def_property_readonly("node_id", [](const py_tensor& t) { return t.o.node_id(); })
      .def("same_graph", [](const py_tensor& t, const graph_ptr& g) { return t.g == g; })
      .def_property_readonly("graph", [](const py_tensor& t) { return t.g; });

  py::class_<py_operation>(m, "_Operation")
      .def_property_readonly("name", [](const py_operation& o) { return o.op.name(); })
      .def_property_readonly("type", [](const py_operation& o) { return o.op.node().op; })
      .def_property_readonly("node_id", [](const py_operation& o) { return o.op.node_id(); })
      .def_property_readonly("device", [](const py_operation& o) { return o.op.node().device; })
      .def_property_readonly("inputs",
                             [](const py_operation& o) {
                               std::vector<py_tensor> out;
                               for (endpoint e : o.op.node().inputs)
                                 out.push_back({o.g, output(o.g.get(), e)});
                               return out;
                             })
      .def_property_readonly("outputs",
                             [](const py_operation& o) {
                               std::vector<py_tensor> out;
                               for (int i = 0; i < o.op.node().num_outputs(); ++i)
                                 out.push_back({o.g, output(o.g.get(), {o.op.node_id(), i})});
                               return out;
                             })
      .def("get_attr",
           [](const py_operation& o, const std::string& key) {
             auto& attrs = o.op.node().attrs;
             auto it = attrs.find(key);
             if (it == attrs.end())
               throw py::value_error("node '" + o.op.name() + "' has no attribute '" + key + "'");
             return from_attr(it->second);
           })
      .def_property_readonly("graph", [](const py_operation& o) { return o.g; });

  py::class_<graph, graph_ptr>(m, "_Graph")
      .def(py::init([] { return adopt_graph(graph()); }))
      .def("build", [](const graph_ptr& g, const std::string& op, const std::string& name,
                       const std::vector<py_tensor>& inputs,
                       const py::dict& attrs) { return build(g, op, name, inputs, attrs); })
      .def("tensor",
           [](const graph_ptr& g, const std::string& spec) {
             return py_tensor{g, output(g.get(), check(g->find_endpoint(spec)))};
           })
      .def("operation",
           [](const graph_ptr& g, const std::string& node_name) {
             auto id = g->find(node_name);
             if (!id)
               throw py::key_error("no node named '" + node_name + "' in the graph");
             return py_operation{g, operation(g.get(), *id)};
           })
      .def("operation_at",
           [](const graph_ptr& g, int id) {
             return py_operation{g, operation(g.get(), id)};
           })
      .def("num_nodes", &graph::num_nodes)
      .def("to_text", &graph::to_text)
      .def("set_seed", &graph::set_seed)
      .def("collection",
           [](const graph_ptr& g, const std::string& key) {
             std::vector<py_operation> out;
             for (int id : g->collection(key))
               out.push_back({g, operation(g.get(), id)});
             return out;
           })
      .def("add_to_collection",
           [](const graph_ptr& g, const std::string& key, const py_operation& op) {
             g->add_to_collection(key, op.op.node_id());
           })
      .def("name_scope",
           [](const graph_ptr& g, const std::string& n) {
             return scope_object({[g, n] { return g->name_scope(n); }, {}});
           })
      .def("device",
           [](const graph_ptr& g, const std::string& d) {
             return scope_object({[g, d] { return g->device(d); }, {}});
           })
      .def("control_dependencies",
           [](const graph_ptr& g, const std::vector<py_operation>& ops) {
             std::vector<operation> deps;
             for (auto& o : ops)
               deps.push_back(o.op);
             return scope_object({[g, deps] { return g->control_dependencies(deps); }, {}});
           })
      .def("outside_control_flow",
           [](const graph_ptr& g) {
             // Nodes added inside belong to no cond branch or loop and wait on nothing (a
             // variable made while a loop body is built, as TensorFlow's init_scope).
             return scope_object({[g] { return g->enter_context(nullptr); }, {}});
           })
      .def("colocate_with",
           [](const graph_ptr& g, const py_operation& op) {
             return scope_object({[g, op] { return g->colocate_with(op.op); }, {}});
           })
      .def("serialize", [](const graph_ptr& g) { return py::bytes(serialize_graph(*g)); })
      .def("save", [](const graph_ptr& g, const std::string& path) { check(save_graph(*g, path)); })
      .def("export_tf", [](const graph_ptr& g, bool text) {
        return py::bytes(
            export_tf_graph_def(*g, text ? tf_graph_format::text : tf_graph_format::binary));
      });

  m.def("_op_defs", &op_defs);
  m.def("_load_graph",
        [](const std::string& path) { return adopt_graph(check(load_graph(path))); });
  m.def("_import_tf_graph",
        [](const std::string& path) { return adopt_graph(check(import_tf_graph(path))); });
  m.def("_import_tf_graph_def", [](const py::bytes& bytes, bool text) {
    return adopt_graph(check(import_tf_graph_def(
        std::string(bytes), text ? tf_graph_format::text : tf_graph_format::binary)));
  });
  m.def("_placeholder",
        [](const graph_ptr& g, const std::string& t, py::handle s, const std::string& n) {
          return py_tensor{g, placeholder(*g, dtype_named(t), to_shape(s), n)};
        });
  m.def("_constant", [](const graph_ptr& g, py::handle value, py::handle t, const std::string& n) {
    tensor v = to_tensor(value, t.is_none() ? dtype::invalid : dtype_named(py::str(t)));
    return py_tensor{g, constant(*g, v.copy(), n)};
  });
  m.def("_seeds", [](const graph_ptr& g, int64_t op_seed) { return seeds(*g, op_seed); });
  m.def("_reduce", [](const std::string& kind, const py_tensor& x,
                      std::optional<std::vector<int64_t>> axes, bool keep, const std::string& n) {
    std::vector<int64_t> ax = axes.value_or(std::vector<int64_t>{});
    if (axes && axes->empty())
      return x; // TensorFlow: reducing over no axis is the identity
    using fn = output (*)(output, std::vector<int64_t>, bool, std::string_view);
    static const std::map<std::string, fn> kinds = {{"sum", sum},
                                                    {"mean", mean},
                                                    {"max", reduce_max},
                                                    {"min", reduce_min},
                                                    {"prod", reduce_prod}};
    return py_tensor{x.g, kinds.at(kind)(x.o, ax, keep, n)};
  });
}

} // namespace runnel::python
