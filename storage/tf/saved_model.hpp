#pragma once
// TensorFlow 1.x's SavedModel: a directory with `saved_model.pb` (or `saved_model.pbtxt`), one
// MetaGraphDef per tag set ("serve", {"serve", "gpu"}, "train"), and `variables/variables.index`
// with its data shards, a V2 checkpoint (storage/tf/tf_checkpoint.hpp).
//
//   auto m = read_tf_saved_model("export/1", {"serve"}).value();
//   m.meta.signatures.at("serving_default").inputs;   // keys -> tensors ("x:0")
//
// This reads what a SavedModel holds; actors/state/saved_model.hpp loads one into a session
// (restores its variables, runs its main op) and runs its signatures.

#include <string>
#include <string_view>
#include <vector>

#include "runnel/storage/tf/meta_graph.hpp"

namespace runnel {

struct tf_saved_model {
  std::string dir;
  tf_meta_graph meta;           ///< the MetaGraph whose tags matched
  std::string variables_prefix; ///< `dir/variables/variables`, empty when the model has none
  /// The node to run after restoring: the `saved_model_main_op` collection's, else the
  /// `legacy_init_op` collection's; empty when neither is there.
  std::string init_op;
  /// Every MetaGraph's tags, in the file's order (for listings and errors).
  std::vector<std::vector<std::string>> tag_sets;
};

/// Whether `path` is a directory holding saved_model.pb or saved_model.pbtxt.
bool is_tf_saved_model(const std::string& path);
/// Reads `dir`'s SavedModel and imports the MetaGraph whose tag set is `tags` (in any order);
/// none matching is not_found listing the tag sets there are.
result<tf_saved_model> read_tf_saved_model(const std::string& dir,
                                           const std::vector<std::string>& tags = {"serve"},
                                           const op_registry& ops = builtin_ops());
/// The same from saved_model.pb's bytes (binary or text); `source` names it in errors; the
/// variables are looked for under `dir` (may be empty: no variables). For the fuzz target.
result<tf_saved_model> parse_tf_saved_model(std::string_view bytes, const std::string& source,
                                            const std::string& dir,
                                            const std::vector<std::string>& tags,
                                            const op_registry& ops = builtin_ops());
/// Writes `g` as `path` (a saved_model.pb, binary): one MetaGraph tagged `tags`, the graph
/// (storage/tf/tf_graph.hpp's export), a `variables` collection of VariableDefs for `variables`
/// (VariableV2 node names), and `signatures`. No SaverDef: TensorFlow's loader then makes a
/// saver restoring every variable by name, as this one does. Written beside and renamed.
status write_tf_saved_model_file(const std::string& path, const graph& g,
                                 const std::vector<std::string>& variables,
                                 const std::map<std::string, tf_signature>& signatures,
                                 const std::vector<std::string>& tags);
/// "serve, gpu" — a tag set as listings print it.
std::string tag_set_string(const std::vector<std::string>& tags);

} // namespace runnel
