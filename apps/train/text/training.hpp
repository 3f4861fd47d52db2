#pragma once
// What the text-model apps share around a training run.

#include <cstdint>
#include <string>

#include "runnel/actors/exec/session.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/ops/train/optimizers.hpp"

namespace runnel::apps {

/// With `resume` and a checkpoint in `dir`: restores it and returns its global step (saying so
/// on stderr); otherwise runs the graph's variable initializers and returns 0.
int64_t restore_or_initialize(session& s, saver& sv, graph& g, const std::string& dir, bool resume);

/// `opt`'s update of every trainable variable from `loss`, the gradients first clipped to a
/// global norm of `clip` (TensorFlow's clip_by_global_norm), then global_step += 1.
operation clipped_update(optimizer& opt, output loss, double clip, const graph_variable& step);

/// Where training stands when epochs have no fixed step count (batches bucketed by length): a
/// non-trainable variable {epochs done, global step at the end of the last}, which checkpoints
/// save. Build it before the saver; load() after restoring or initialising.
class epoch_counter {
public:
  explicit epoch_counter(graph& g);
  void load(session& s);
  int epochs_done() const { return epochs_; }
  /// The global step the current epoch began at: a resumed epoch skips the batches since.
  int64_t epoch_start() const { return start_; }
  void finish_epoch(session& s, int64_t global_step);

private:
  graph_variable var_;
  output value_;
  operation set_;
  int epochs_ = 0;
  int64_t start_ = 0;
};

} // namespace runnel::apps
