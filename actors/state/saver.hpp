#pragma once
// Saving and restoring variables through a session, to HDF5 checkpoints (storage/checkpoint) or
// TensorFlow's V2 checkpoints (saver_options::format; restore reads a TensorFlow prefix, such as
// `train/model.ckpt-1000`, whenever `prefix.index` exists).
//
//   saver sv(g);                                       // every variable; adds restore nodes
//   auto path = sv.save(s, "ckpt/model", global_step); // ckpt/model-1000.h5 + ckpt/checkpoint
//   ...
//   if (auto latest = saver::latest_checkpoint("ckpt")) throw_if_error(sv.restore(s, *latest));
//
// `max_to_keep` old checkpoints are kept (0 = all); older files are deleted and the directory's
// `checkpoint` state file lists what remains. Restore checks every variable before assigning
// any: a missing variable or a shape/dtype mismatch is an error naming it and the file, and no
// variable is changed. A name map restores from files written by others (e.g. Keras weights:
// {"dense/kernel", "model_weights/dense/dense/kernel:0"}).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/graph/builder.hpp"

namespace runnel {

enum class checkpoint_format {
  hdf5,       ///< prefix-<step>.h5 (storage/checkpoint.hpp)
  tensorflow, ///< TensorFlow's V2 format: prefix-<step>.index and .data-00000-of-00001, which
              ///< tf.train.Saver restores (storage/tf/tf_checkpoint.hpp)
};

struct saver_options {
  /// Checkpoints kept by save(); 0 keeps all.
  int max_to_keep = 5;
  /// What save() writes; restore() reads either, whatever this says.
  checkpoint_format format = checkpoint_format::hdf5;
};

struct restore_options {
  /// Restore only these variables (by name); empty = all of the saver's.
  std::vector<std::string> only;
  /// Variable name -> dataset name in the file, for variables saved under another name.
  std::map<std::string, std::string> name_map;
};

/// The name a variable is saved under: its `shared_name`, or its node name — without its
/// `container`, which places it in a runtime but is not part of its name (as in TensorFlow).
std::string variable_checkpoint_name(const node& variable_node);

class saver {
public:
  /// Saves `variables` (refs of VariableV2 nodes; empty = the graph's "variables"). Adds a
  /// placeholder and an Assign per variable to the graph, under "save/".
  explicit saver(graph& g, std::vector<output> variables = {}, saver_options options = {});

  /// Writes `prefix-<step>.h5` (or `prefix.h5` without a step; TensorFlow's format: the prefix
  /// `prefix-<step>` with its .index and data shard) and updates the state file.
  result<std::string> save(session& s, const std::string& prefix,
                           std::optional<int64_t> global_step = std::nullopt);
  status restore(session& s, const std::string& path, const restore_options& options = {});
  /// The newest complete, readable checkpoint of `dir` (a path including `dir`): the state
  /// file's latest, else the others it lists, newest first, else the directory's `*.h5` files by
  /// step. Each candidate is read whole in a child process first (verify_checkpoint_isolated):
  /// a damaged file is skipped, with a line on stderr, instead of failing or crashing a resume.
  static result<std::string> latest_checkpoint(const std::string& dir);

private:
  struct entry {
    std::string name;
    output ref;
    output feed;
    operation assign;
  };
  std::vector<entry> entries_;
  saver_options options_;
};

} // namespace runnel
