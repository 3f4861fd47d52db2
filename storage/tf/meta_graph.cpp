// MetaGraphDef -> Runnel graph, its variables, collections and signatures (meta_graph.hpp).
#include "runnel/storage/tf/meta_graph.hpp"

#include <charconv>
#include <set>

#include "runnel/storage/tf/tf_types.hpp"

namespace runnel {

namespace {

/// Ops only a tf.train.Saver's nodes hold: a scope with one of them is a saver's.
const std::set<std::string, std::less<>> checkpoint_ops = {
    "SaveV2",  "RestoreV2",    "MergeV2Checkpoints", "Save",           "SaveSlices",
    "Restore", "RestoreSlice", "ShardedFilename",    "ShardedFilespec"};

std::string top_scope(const std::string& name) {
  return name.substr(0, name.find('/'));
}

using tf::node_of;

/// The GraphDef less the savers' scopes; `left_out` gets their names. A kept node that reads a
/// left-out one is an error naming both.
result<tensorflow::GraphDef> without_savers(const tensorflow::GraphDef& in,
                                            std::vector<std::string>& left_out) {
  std::set<std::string> scopes;
  for (auto& n : in.node())
    if (checkpoint_ops.count(n.op()) && n.name().find('/') != std::string::npos)
      scopes.insert(top_scope(n.name()));
  left_out.assign(scopes.begin(), scopes.end());
  tensorflow::GraphDef out = in;
  out.clear_node();
  for (auto& n : in.node()) {
    if (scopes.count(top_scope(n.name())))
      continue;
    for (auto& input : n.input())
      if (auto from = node_of(input); scopes.count(top_scope(from)))
        return invalid_argument("node '" + n.name() + "' reads '" + from +
                                "' of the saver scope '" + top_scope(from) +
                                "/', which Runnel leaves out (its saver restores "
                                "by variable name instead)");
    *out.add_node() = n;
  }
  return out;
}

/// The string values of a Const node of `gd` ("save/RestoreV2/tensor_names"), or nullptr.
const tensorflow::TensorProto* const_value(const tensorflow::GraphDef& gd,
                                           const std::string& name) {
  for (auto& n : gd.node())
    if (n.name() == name && n.op() == "Const")
      if (auto it = n.attr().find("value"); it != n.attr().end() && it->second.has_tensor())
        return &it->second.tensor();
  return nullptr;
}

/// What saver_keys puts before the key of a variable restored as a slice.
const std::string sliced_mark = "\x01slice:";

/// Variable -> checkpoint key, as the saver whose restore op is `restore_op` assigns them: each
/// RestoreV2 of its scope reads `tensor_names[i]` into output i, and an Assign of the scope
/// writes output i into a variable.
result<std::map<std::string, std::string>> saver_keys(const tensorflow::GraphDef& gd,
                                                      const std::string& restore_op) {
  std::map<std::string, std::string> keys;
  if (restore_op.empty())
    return keys;
  std::string scope = top_scope(node_of(restore_op)) + "/";
  std::map<std::string, std::vector<std::string>> restores; // RestoreV2 node -> its key names
  for (auto& n : gd.node()) {
    if (n.op() != "RestoreV2" || !n.name().starts_with(scope))
      continue;
    if (n.input_size() < 3)
      return data_loss("saver node '" + n.name() + "' has " + std::to_string(n.input_size()) +
                       " inputs; RestoreV2 takes prefix, tensor_names and shape_and_slices");
    auto* names = const_value(gd, node_of(n.input(1)));
    if (!names)
      return data_loss("saver node '" + n.name() + "': its tensor_names input is not a constant");
    auto* slices = const_value(gd, node_of(n.input(2)));
    auto& restored = restores[n.name()];
    restored.assign(names->string_val().begin(), names->string_val().end());
    // A slice of a partitioned variable is marked: its key names the whole tensor.
    for (int i = 0; slices && i < slices->string_val_size() && i < int(restored.size()); ++i)
      if (!slices->string_val(i).empty())
        restored[size_t(i)] =
            sliced_mark + restored[size_t(i)] + "' (" + slices->string_val(i) + ")";
  }
  for (auto& n : gd.node()) {
    if (n.op() != "Assign" || !n.name().starts_with(scope) || n.input_size() < 2)
      continue;
    std::string_view from = n.input(1);
    auto colon = from.rfind(':');
    std::string producer = node_of(from);
    auto it = restores.find(producer);
    if (it == restores.end())
      continue;
    size_t index = 0;
    if (colon != std::string_view::npos) {
      auto digits = from.substr(colon + 1);
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (ec != std::errc() || end != digits.data() + digits.size())
        return data_loss("saver node '" + n.name() + "' has a malformed input '" +
                         std::string(from) + "'");
    }
    if (index >= it->second.size())
      return data_loss("saver node '" + n.name() + "' reads output " + std::to_string(index) +
                       " of '" + producer + "', which restores " +
                       std::to_string(it->second.size()) + " tensors");
    keys[node_of(n.input(0))] = it->second[index];
  }
  return keys;
}

/// The variables a collection of VariableDefs names, as node ids of `g`.
result<std::vector<int>> collection_variables(const graph& g, const tensorflow::CollectionDef& c,
                                              const std::string& name) {
  std::vector<int> ids;
  for (auto& bytes : c.bytes_list().value()) {
    tensorflow::VariableDef v;
    if (!v.ParseFromString(bytes))
      return data_loss("collection '" + name + "' holds an entry that is not a VariableDef");
    std::string node = node_of(v.variable_name());
    if (v.is_resource())
      return unimplemented("variable '" + node +
                           "' is a resource variable (TensorFlow 2's, or use_resource=True); "
                           "Runnel reads TensorFlow 1.x's reference variables (VariableV2)");
    auto id = g.find(node);
    if (!id)
      return data_loss("collection '" + name + "' names variable '" + node +
                       "', which is not in the graph");
    if (g.at(*id).op != "VariableV2")
      return data_loss("collection '" + name + "' names '" + node + "', a " + g.at(*id).op +
                       " node, not a variable");
    ids.push_back(*id);
  }
  return ids;
}

std::string describe(const tensorflow::CollectionDef& c) {
  auto n = [](int count, const char* one, const char* many) {
    return std::to_string(count) + " " + (count == 1 ? one : many);
  };
  switch (c.kind_case()) {
    case tensorflow::CollectionDef::kNodeList:
      return n(c.node_list().value_size(), "node", "nodes");
    case tensorflow::CollectionDef::kBytesList:
      return n(c.bytes_list().value_size(), "serialized entry", "serialized entries");
    case tensorflow::CollectionDef::kInt64List:
      return n(c.int64_list().value_size(), "int64", "int64s");
    case tensorflow::CollectionDef::kFloatList:
      return n(c.float_list().value_size(), "float", "floats");
    default:
      return "entries of a kind Runnel does not read";
  }
}

result<tf_tensor_info> tensor_info(const tensorflow::TensorInfo& t, const std::string& where) {
  tf_tensor_info out{t.name(), dtype::invalid, shape::unknown()};
  if (t.name().empty())
    return unimplemented(where + ": only tensors named by `name` are read (not sparse or "
                                 "composite encodings)");
  auto type = tf::from_proto(t.dtype());
  if (!type)
    return type.error().with_context(where);
  out.type = *type;
  if (t.has_tensor_shape()) {
    RUNNEL_ASSIGN_OR_RETURN(out.dims, tf::from_proto(t.tensor_shape()));
  }
  return out;
}

} // namespace

result<tf_meta_graph> tf::meta_graph_from_proto(const tensorflow::MetaGraphDef& m,
                                                const op_registry& ops) {
  tf_meta_graph out{graph(ops), {}, {}, {}, {}, {}, {}, {}, {}, {}};
  out.restore_op = m.saver_def().restore_op_name();
  RUNNEL_ASSIGN_OR_RETURN(out.checkpoint_keys, saver_keys(m.graph_def(), out.restore_op));
  for (auto it = out.checkpoint_keys.begin(); it != out.checkpoint_keys.end();)
    if (it->second.starts_with(sliced_mark)) {
      out.sliced_variables.push_back(it->first + " as a slice of '" +
                                     it->second.substr(sliced_mark.size()));
      it = out.checkpoint_keys.erase(it);
    } else {
      ++it;
    }
  RUNNEL_ASSIGN_OR_RETURN(auto gd, without_savers(m.graph_def(), out.left_out));
  RUNNEL_ASSIGN_OR_RETURN(out.graph, tf::graph_from_proto(gd, ops));
  auto& info = m.meta_info_def();
  out.tags.assign(info.tags().begin(), info.tags().end());
  out.tensorflow_version = info.tensorflow_version();
  for (auto& [name, c] : m.collection_def())
    out.collections[name] = describe(c);
  for (auto name : {"variables", "trainable_variables"}) {
    auto it = m.collection_def().find(name);
    if (it == m.collection_def().end() || !it->second.has_bytes_list())
      continue;
    RUNNEL_ASSIGN_OR_RETURN(auto ids, collection_variables(out.graph, it->second, name));
    for (int id : ids)
      out.graph.add_to_collection(name, id);
  }
  if (out.graph.collection("variables").empty()) // no collection: every variable of the graph
    for (auto& n : out.graph.nodes())
      if (n.op == "VariableV2")
        out.graph.add_to_collection("variables", n.id);
  for (int id : out.graph.collection("variables"))
    out.variables.push_back(out.graph.at(id).name);
  for (auto& [key, sig] : m.signature_def()) {
    tf_signature s;
    s.method = sig.method_name();
    for (auto& [k, t] : sig.inputs()) {
      RUNNEL_ASSIGN_OR_RETURN(s.inputs[k],
                              tensor_info(t, "signature '" + key + "' input '" + k + "'"));
    }
    for (auto& [k, t] : sig.outputs()) {
      RUNNEL_ASSIGN_OR_RETURN(s.outputs[k],
                              tensor_info(t, "signature '" + key + "' output '" + k + "'"));
    }
    out.signatures.emplace(key, std::move(s));
  }
  return out;
}

result<tf_meta_graph> import_tf_meta_graph_def(std::string_view bytes, const std::string& source,
                                               const op_registry& ops) {
  tensorflow::MetaGraphDef m;
  RUNNEL_RETURN_IF_ERROR(tf::parse_message(bytes, m, source, "MetaGraphDef", "a .meta file"));
  auto out = tf::meta_graph_from_proto(m, ops);
  if (!out)
    return out.error().with_context(source);
  return out;
}

result<tf_meta_graph> import_tf_meta_graph(const std::string& path, const op_registry& ops) {
  RUNNEL_ASSIGN_OR_RETURN(auto bytes, tf::read_model_file(path));
  return import_tf_meta_graph_def(bytes, path, ops);
}

} // namespace runnel
