// TensorFlow 1.x MetaGraphs and SavedModels imported into a graph of the caller's (what
// tf.train.import_meta_graph and tf.saved_model.loader.load do), and a graph exported as a
// `.meta` file. The C++ importers make a graph of their own; its nodes are copied into the
// caller's, under `import_scope` when one is given (python/runnel/meta_graph.py wraps these).
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "runnel/storage/keras/keras_import.hpp"
#include "runnel/storage/tf/meta_graph.hpp"
#include "runnel/storage/tf/saved_model.hpp"

namespace runnel::python {

namespace {

std::string endpoint_text(const graph& g, endpoint e) {
  auto& n = g.at(e.node).name;
  return e.index == 0 ? n : n + ":" + std::to_string(e.index);
}

/// Copies every node of `src` into `dst` with `prefix` ("scope/" or empty) before its name (and
/// its loops' frame names), devices cleared when asked, and the collections that list nodes.
void copy_graph(graph& dst, const graph& src, const std::string& prefix, bool clear_devices) {
  for (auto& n : src.nodes()) {
    node_def d;
    d.name = prefix + n.name;
    d.op = n.op;
    d.device = clear_devices ? std::string() : n.device;
    d.attrs = n.attrs;
    if (!prefix.empty())
      if (auto it = d.attrs.find("frame_name"); it != d.attrs.end())
        if (auto* frame = std::get_if<std::string>(&it->second))
          it->second = prefix + *frame;
    for (auto e : n.inputs)
      d.inputs.push_back(prefix + endpoint_text(src, e));
    for (int c : n.control_inputs)
      d.inputs.push_back("^" + prefix + src.at(c).name);
    check(dst.add_node(d).error());
  }
  check(dst.check_complete());
  for (const char* key : {"variables", "trainable_variables", "local_variables"})
    for (int id : src.collection(key))
      dst.add_to_collection(key, *dst.find(prefix + src.at(id).name));
}

/// What Python needs of an imported MetaGraph, its names with the prefix.
py::dict describe(const tf_meta_graph& m, const std::string& prefix) {
  py::dict out;
  std::vector<std::string> variables;
  for (auto& v : m.variables)
    variables.push_back(prefix + v);
  py::dict keys;
  for (auto& [var, key] : m.checkpoint_keys)
    keys[py::str(prefix + var)] = key;
  py::dict signatures;
  for (auto& [key, sig] : m.signatures)
    signatures[py::str(key)] = signature_dict(sig, prefix);
  out["variables"] = variables;
  out["checkpoint_keys"] = keys;
  out["sliced_variables"] = m.sliced_variables;
  out["signatures"] = signatures;
  out["tags"] = m.tags;
  out["tensorflow_version"] = m.tensorflow_version;
  return out;
}

std::string scope_prefix(const std::string& import_scope) {
  return import_scope.empty() ? std::string() : import_scope + "/";
}

} // namespace

py::dict signature_dict(const tf_signature& sig, const std::string& prefix) {
  auto infos = [&](const std::map<std::string, tf_tensor_info>& tensors) {
    py::dict d;
    for (auto& [key, info] : tensors)
      d[py::str(key)] =
          py::make_tuple(prefix + info.name, std::string(name(info.type)), from_shape(info.dims));
    return d;
  };
  py::dict d;
  d["method"] = sig.method;
  d["inputs"] = infos(sig.inputs);
  d["outputs"] = infos(sig.outputs);
  return d;
}

void bind_meta_graph(py::module_& m) {
  m.def("_import_meta_graph",
        [](const graph_ptr& g, const std::string& path, std::optional<py::bytes> data,
           const std::string& import_scope, bool clear_devices) {
          auto mg = data ? check(import_tf_meta_graph_def(std::string(*data), "<bytes>"))
                         : check(import_tf_meta_graph(path));
          std::string prefix = scope_prefix(import_scope);
          copy_graph(*g, mg.graph, prefix, clear_devices);
          return describe(mg, prefix);
        });
  m.def("_import_saved_model",
        [](const graph_ptr& g, const std::string& dir, const std::vector<std::string>& tags,
           const std::string& import_scope, bool clear_devices) {
          auto sm = check(read_tf_saved_model(dir, tags));
          std::string prefix = scope_prefix(import_scope);
          copy_graph(*g, sm.meta.graph, prefix, clear_devices);
          py::dict out = describe(sm.meta, prefix);
          out["init_op"] = sm.init_op.empty() ? std::string() : prefix + sm.init_op;
          out["variables_prefix"] = sm.variables_prefix;
          return out;
        });
  m.def("_import_keras", [](const std::string& path) {
    auto k = check(import_keras_model(path));
    py::dict out;
    out["name"] = k.name;
    out["class_name"] = k.class_name;
    out["keras_version"] = k.keras_version;
    out["inputs"] = k.inputs;
    out["outputs"] = k.outputs;
    out["layers"] = k.layers;
    out["graph"] = adopt_graph(std::move(k.g));
    return out;
  });
  m.def("_export_meta_graph",
        [](const graph_ptr& g, const std::string& path, const std::vector<std::string>& variables,
           const std::vector<std::string>& tags) {
          check(write_tf_meta_graph_file(path, *g, variables, tags));
        });
}

} // namespace runnel::python
