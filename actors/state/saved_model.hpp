#pragma once
// TensorFlow 1.x SavedModels, loaded as TensorFlow's loader does and served by signature:
//
//   runtime rt;
//   auto m = saved_model::load(rt, "export/1", {"serve"}).value();
//   auto out = m->run("serving_default", {{"x", read_npy("x.npy").value()}}).value();
//   out.at("y");                                 // by the signature's output keys
//
// Loading picks the MetaGraph whose tags match (storage/tf/saved_model.hpp), restores the
// variables from `variables/variables` through the MetaGraph's own saver (its SaverDef's
// RestoreV2 keys, so a saver that renamed variables restores them right; a second saver in the
// graph is not used), then runs the main op (`saved_model_main_op`, else `legacy_init_op`) —
// never the variables' initializers. A signature's input may name any tensor, not only a
// placeholder: feeding it overrides what produces it. Inputs are checked against the
// signature's dtypes and shapes before a step runs.
//
// save_saved_model writes a Runnel graph with its variables' values as a SavedModel that
// TensorFlow 1.x's loader (and this one) reads: saved_model.pb with one MetaGraph, and the
// variables in TensorFlow's checkpoint format.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runnel/actors/exec/session.hpp"
#include "runnel/storage/tf/saved_model.hpp"

namespace runnel {

class saved_model {
public:
  /// Reads, restores and initializes `dir`'s MetaGraph tagged `tags` in a session of `rt`.
  static result<std::unique_ptr<saved_model>> load(runtime& rt, const std::string& dir,
                                                   const std::vector<std::string>& tags = {"serve"},
                                                   session_options options = {});
  ~saved_model();

  const tf_saved_model& model() const { return model_; }
  const std::map<std::string, tf_signature>& signatures() const { return model_.meta.signatures; }
  /// The session the model runs in (its graph is model().meta.graph), for running tensors by
  /// name.
  runnel::session& session() { return *session_; }

  /// Runs signature `key` on `inputs` (by the signature's input keys) and returns `outputs` (by
  /// its output keys; empty = all of them). An unknown key, or an input whose dtype or shape the
  /// signature does not allow, is an error listing what the signature has.
  result<std::map<std::string, tensor>> run(const std::string& key,
                                            const std::map<std::string, tensor>& inputs,
                                            const std::vector<std::string>& outputs = {});

private:
  saved_model() = default;
  tf_saved_model model_;
  std::unique_ptr<runnel::session> session_;
};

/// A signature of a graph to export: its method and tensors ("x:0" or "x") by key.
struct saved_model_signature {
  std::string method = "tensorflow/serving/predict";
  std::map<std::string, std::string> inputs, outputs;
};

/// Writes `g` (run in `s`, whose variables' current values are saved) as a SavedModel in `dir`
/// (which must not exist yet, as TensorFlow's builder requires): `saved_model.pb` with one
/// MetaGraph tagged `tags`, its variables collection and `signatures`, and
/// `variables/variables.{index,data-00000-of-00001}`.
status save_saved_model(runnel::session& s, const graph& g, const std::string& dir,
                        const std::map<std::string, saved_model_signature>& signatures,
                        const std::vector<std::string>& tags = {"serve"});

} // namespace runnel
