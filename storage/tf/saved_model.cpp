// SavedModel directories: the MetaGraph by tag set, its variables and init op (saved_model.hpp).
#include "runnel/storage/tf/saved_model.hpp"

#include <algorithm>
#include <filesystem>

#include "runnel/ops/core/atomic_file.hpp"
#include "runnel/storage/tf/tf_checkpoint.hpp"
#include "runnel/storage/tf/tf_graph.hpp"
#include "runnel/storage/tf/tf_types.hpp"

namespace runnel {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

/// The one node a node-list collection names (the main op's or the legacy init op's).
result<std::string> collection_node(const tensorflow::MetaGraphDef& m, const std::string& key) {
  auto it = m.collection_def().find(key);
  if (it == m.collection_def().end())
    return std::string();
  auto& c = it->second;
  if (!c.has_node_list() || c.node_list().value_size() != 1)
    return data_loss("collection '" + key +
                     "' must name exactly one op (TensorFlow's loader "
                     "requires it), it holds " +
                     std::to_string(c.has_node_list() ? c.node_list().value_size() : 0) +
                     " node names");
  return tf::node_of(c.node_list().value(0));
}

} // namespace

std::string tag_set_string(const std::vector<std::string>& tags) {
  std::string out;
  for (auto& t : tags)
    out += (out.empty() ? "" : ", ") + t;
  return out.empty() ? std::string("(no tags)") : out;
}

bool is_tf_saved_model(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && (fs::exists(fs::path(path) / "saved_model.pb", ec) ||
                                        fs::exists(fs::path(path) / "saved_model.pbtxt", ec));
}

result<tf_saved_model> parse_tf_saved_model(std::string_view bytes, const std::string& source,
                                            const std::string& dir,
                                            const std::vector<std::string>& tags,
                                            const op_registry& ops) {
  tensorflow::SavedModel sm;
  RUNNEL_RETURN_IF_ERROR(tf::parse_message(bytes, sm, source, "SavedModel", "a saved_model.pb"));
  tf_saved_model out;
  out.dir = dir;
  const tensorflow::MetaGraphDef* match = nullptr;
  auto want = sorted(tags);
  for (auto& m : sm.meta_graphs()) {
    auto& t = m.meta_info_def().tags();
    out.tag_sets.emplace_back(t.begin(), t.end());
    if (!match && sorted(out.tag_sets.back()) == want)
      match = &m;
  }
  if (!match) {
    std::string there;
    for (auto& t : out.tag_sets)
      there += "\n  " + tag_set_string(t);
    return not_found(source + ": no MetaGraph has the tags {" + tag_set_string(tags) + "}; " +
                     (out.tag_sets.empty() ? std::string("it holds no MetaGraph")
                                           : "its tag sets are:" + there));
  }
  auto meta = tf::meta_graph_from_proto(*match, ops);
  if (!meta)
    return meta.error().with_context(source + ", MetaGraph {" + tag_set_string(tags) + "}");
  out.meta = std::move(meta).value();
  auto main_op = collection_node(*match, "saved_model_main_op");
  if (!main_op)
    return main_op.error().with_context(source);
  out.init_op = *main_op;
  if (out.init_op.empty()) {
    auto legacy = collection_node(*match, "legacy_init_op");
    if (!legacy)
      return legacy.error().with_context(source);
    out.init_op = *legacy;
  }
  if (!out.init_op.empty() && !out.meta.graph.find(out.init_op))
    return data_loss(source + ": the init op '" + out.init_op + "' is not in the graph");
  std::string prefix = (fs::path(dir) / "variables" / "variables").string();
  if (!dir.empty() && is_tf_checkpoint(prefix))
    out.variables_prefix = prefix;
  else if (!out.meta.variables.empty())
    return not_found(source + ": the graph has " + std::to_string(out.meta.variables.size()) +
                     (out.meta.variables.size() == 1 ? " variable (" : " variables (") +
                     out.meta.variables.front() + (out.meta.variables.size() == 1 ? "" : ", ...") +
                     ") but " + prefix + ".index does not exist");
  return out;
}

result<tf_saved_model> read_tf_saved_model(const std::string& dir,
                                           const std::vector<std::string>& tags,
                                           const op_registry& ops) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return not_found(dir + ": not a directory (a SavedModel is a directory holding "
                           "saved_model.pb and variables/)");
  std::string file = (fs::path(dir) / "saved_model.pb").string();
  if (!fs::exists(file, ec))
    file = (fs::path(dir) / "saved_model.pbtxt").string();
  if (!fs::exists(file, ec))
    return not_found(dir + ": holds neither saved_model.pb nor saved_model.pbtxt");
  RUNNEL_ASSIGN_OR_RETURN(auto bytes, tf::read_model_file(file));
  return parse_tf_saved_model(bytes, file, dir, tags, ops);
}

namespace {

/// A VariableDef for variable `name`: its initializer (an Assign writing it) and snapshot (an
/// Identity reading it) when the graph has them, as TensorFlow's Variable.to_proto writes.
std::string variable_def(const graph& g, const std::string& name) {
  tensorflow::VariableDef v;
  v.set_variable_name(name + ":0");
  v.set_snapshot_name(name + ":0");
  v.set_trainable(true);
  auto id = g.find(name);
  for (auto& n : g.nodes()) {
    if (n.inputs.empty() || !id || n.inputs[0].node != *id)
      continue;
    if (n.op == "Assign" && v.initializer_name().empty() && !n.name.starts_with("save/"))
      v.set_initializer_name(n.name);
    else if (n.op == "Identity" && v.snapshot_name() == name + ":0")
      v.set_snapshot_name(n.name + ":0");
  }
  std::string bytes;
  v.SerializeToString(&bytes);
  return bytes;
}

} // namespace

namespace {

/// Fills `m` with `g`, its variables' collections, signatures and tags.
status fill_meta_graph(tensorflow::MetaGraphDef* m, const graph& g,
                       const std::vector<std::string>& variables,
                       const std::map<std::string, tf_signature>& signatures,
                       const std::vector<std::string>& tags) {
  auto* info = m->mutable_meta_info_def();
  info->set_meta_graph_version("runnel");
  for (auto& t : tags)
    info->add_tags(t);
  if (!m->mutable_graph_def()->ParseFromString(export_tf_graph_def(g)))
    return internal_error("write_tf_saved_model_file: the exported GraphDef does not parse");
  if (!variables.empty()) {
    auto& vars = (*m->mutable_collection_def())["variables"];
    for (auto& name : variables)
      vars.mutable_bytes_list()->add_value(variable_def(g, name));
    (*m->mutable_collection_def())["trainable_variables"] = vars;
  }
  for (auto& [key, sig] : signatures) {
    auto& out = (*m->mutable_signature_def())[key];
    out.set_method_name(sig.method);
    auto put = [](const tf_tensor_info& t, tensorflow::TensorInfo* info) {
      info->set_name(t.name);
      info->set_dtype(tf::to_proto(t.type));
      tf::to_proto(t.dims, info->mutable_tensor_shape());
    };
    for (auto& [k, t] : sig.inputs)
      put(t, &(*out.mutable_inputs())[k]);
    for (auto& [k, t] : sig.outputs)
      put(t, &(*out.mutable_outputs())[k]);
  }
  return {};
}

} // namespace

status write_tf_saved_model_file(const std::string& path, const graph& g,
                                 const std::vector<std::string>& variables,
                                 const std::map<std::string, tf_signature>& signatures,
                                 const std::vector<std::string>& tags) {
  tensorflow::SavedModel sm;
  sm.set_saved_model_schema_version(1);
  RUNNEL_RETURN_IF_ERROR(fill_meta_graph(sm.add_meta_graphs(), g, variables, signatures, tags));
  std::string bytes;
  sm.SerializeToString(&bytes);
  return write_file_atomically(path, bytes);
}

status write_tf_meta_graph_file(const std::string& path, const graph& g,
                                const std::vector<std::string>& variables,
                                const std::vector<std::string>& tags) {
  tensorflow::MetaGraphDef m;
  RUNNEL_RETURN_IF_ERROR(fill_meta_graph(&m, g, variables, {}, tags));
  std::string bytes;
  m.SerializeToString(&bytes);
  return write_file_atomically(path, bytes);
}

} // namespace runnel
