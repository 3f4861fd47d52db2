#pragma once
// TensorFlow 1.x's MetaGraphDef: the `model.ckpt-N.meta` file tf.train.Saver writes beside each
// checkpoint (the graph with its variables, collections and saver), and the graphs a SavedModel
// holds. Importing one is TensorFlow's resume pattern:
//
//   auto mg = import_tf_meta_graph("train/model.ckpt-1000.meta").value();
//   runtime rt;
//   session s(rt, mg.graph);
//   saver sv(mg.graph);                                    // the graph's variables
//   throw_if_error(sv.restore(s, "train/model.ckpt-1000")); // then train or serve on
//
// The graph imports as a GraphDef does (storage/tf/tf_graph.hpp), less the nodes of its savers:
// every top-level scope holding a checkpoint op (SaveV2, RestoreV2, MergeV2Checkpoints, ...;
// usually `save/`, and `save_1/` when a second saver was made). Runnel's saver restores by
// variable name instead. The variables are the `variables` collection's (VariableDef protos),
// else every VariableV2 node; they are put in the graph's "variables" (and
// "trainable_variables") collections, which the saver and optimizers read.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

/// A tensor a signature names: "x:0", its dtype and shape (dimensions of -1 unknown).
struct tf_tensor_info {
  std::string name;
  dtype type = dtype::invalid;
  shape dims;
};

/// A SignatureDef: its method ("tensorflow/serving/predict", ...) and tensors by key.
struct tf_signature {
  std::string method;
  std::map<std::string, tf_tensor_info> inputs, outputs;
};

struct tf_meta_graph {
  runnel::graph graph;
  std::vector<std::string> tags;      ///< MetaInfoDef's tags ("serve", "train")
  std::string tensorflow_version;     ///< the TensorFlow that wrote it, when it says
  std::vector<std::string> variables; ///< the graph's variables, by node name
  std::vector<std::string> left_out;  ///< the savers' scopes not imported ("save", "save_1")
  std::string restore_op;             ///< what the SaverDef names (left out with its scope)
  /// Variable -> its key in the checkpoint, as the SaverDef's own saver restores it (its
  /// RestoreV2 nodes' `tensor_names` and the Assigns they feed; a graph's second saver, `save_1/`,
  /// is not read). Empty when the MetaGraph has no such saver: restore by variable name then.
  std::map<std::string, std::string> checkpoint_keys;
  /// Variables that saver restores as slices of a partitioned variable ("w/part_0 as a slice of
  /// 'w' (10 4 0,5:0,4)"), not in checkpoint_keys.
  std::vector<std::string> sliced_variables;
  std::map<std::string, std::string> collections; ///< name -> what it holds ("3 nodes", ...)
  std::map<std::string, tf_signature> signatures;
};

/// Reads a `.meta` file (binary, or text format by the .pbtxt/.txt extension or by its bytes).
result<tf_meta_graph> import_tf_meta_graph(const std::string& path,
                                           const op_registry& ops = builtin_ops());
/// Writes `g` as a `.meta` file (a binary MetaGraphDef) TensorFlow's tf.train.import_meta_graph
/// reads: the graph, a `variables` collection of VariableDefs for `variables` (VariableV2 node
/// names), `tags`. No SaverDef: a saver made on import restores the variables by name. Written
/// beside and renamed (storage/tf/saved_model.cpp, with the SavedModel writer it shares).
status write_tf_meta_graph_file(const std::string& path, const graph& g,
                                const std::vector<std::string>& variables,
                                const std::vector<std::string>& tags = {});
/// The same from a MetaGraphDef's bytes; `source` names it in errors.
result<tf_meta_graph> import_tf_meta_graph_def(std::string_view bytes, const std::string& source,
                                               const op_registry& ops = builtin_ops());

} // namespace runnel
