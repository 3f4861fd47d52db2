#pragma once
// TensorBoard logs for the training apps (--logdir DIR): a summary_writer that is there only when
// the flag is, so the apps call it unconditionally.
//
//   training_log log(f.get("logdir", ""), "worker-1");   // empty: logs nothing
//   log.graph(g);
//   log.scalar("train/loss", loss, step);

#include <memory>
#include <string>
#include <string_view>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {
class summary_writer;
}

namespace runnel::apps {

class training_log {
public:
  /// `logdir` empty: nothing is written. `run` names a sub-folder (a task's), or is empty.
  training_log(const std::string& logdir, const std::string& run = "");
  ~training_log();
  training_log(const training_log&) = delete;
  training_log& operator=(const training_log&) = delete;

  bool enabled() const { return writer_ != nullptr; }
  void graph(const runnel::graph& g);
  void scalar(std::string_view tag, double value, int64_t step);
  /// A summary op's output (a serialized Summary).
  void summary(const tensor& serialized, int64_t step);
  /// Flushes; throws runnel::error when writing failed (a full disk), naming the file.
  void close();

private:
  std::unique_ptr<summary_writer> writer_;
};

} // namespace runnel::apps
