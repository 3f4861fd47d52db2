#pragma once
// Helpers the training apps share: idx (MNIST-format) files, a live progress line, command-line
// flags, and loss/accuracy curves as CSV and SVG.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runnel/ops/core/tensor.hpp"

namespace runnel::apps {

/// An idx file (optionally gzip-compressed): uint8 data with its dimensions.
struct idx_data {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};
/// Reads an idx file; errors name the file and what is wrong (magic, dimensions, truncation).
result<idx_data> read_idx(const std::string& path);

/// Images scaled to [0,1] as float32 [n, rows*cols], labels as int32 [n].
struct image_set {
  tensor images;
  tensor labels;
  int64_t size() const { return images.dim(0); }
};
result<image_set> load_image_set(const std::string& images_path, const std::string& labels_path,
                                 int64_t limit = -1);

/// Rows `order[begin..end)` of `t` gathered into a new tensor.
tensor gather_rows(const tensor& t, const std::vector<int64_t>& order, int64_t begin, int64_t end);

/// `--name value` and `--flag` arguments; unknown ones are errors.
class flags {
public:
  flags(int argc, char** argv);
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback) const;
  result<int64_t> get_int(const std::string& name, int64_t fallback) const;
  result<double> get_double(const std::string& name, double fallback) const;
  /// Errors for flags not in `known`.
  status check(const std::vector<std::string>& known) const;

private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

/// The shared `main` of the apps: --help prints `usage`; unknown flags are a usage error (exit 2);
/// runnel::error from `run` is printed with the app's name (exit 1); else `run`'s status. Every
/// app takes --verbose (informational lines on stderr, set_verbose_logging).
int app_main(const char* app, int argc, char** argv, const char* usage,
             const std::vector<std::string>& known_flags, int (*run)(const flags&));

/// A single status line rewritten in place (at most every 200 ms) on a terminal, e.g.
/// `epoch 2/5  step 900/3000  loss 0.4123  acc 0.8530  41230 ex/s  eta 12s`. When stderr is not
/// a terminal (a log file), only finish() writes: the epoch's final state as one line; with the
/// environment variable RUNNEL_PROGRESS_EVERY=S, also a whole line every S seconds (what
/// scripts/cluster-run sets to show every worker's progress).
///
/// The rate is the current epoch's training steps' own (examples since the epoch began over the
/// time they took): evaluation and checkpoints between epochs do not count, so an epoch as fast
/// as the last shows the same rate. The eta extrapolates that rate over the steps left.
class progress_line {
public:
  /// `unit` names what `examples` counts in the rate ("ex/s", "words/s").
  progress_line(int64_t total_steps, int epochs, std::string unit = "ex");
  /// Marks the start of an epoch's training steps: `step` and `examples` done so far. Without
  /// it, an epoch starts at its first update (that step then does not count).
  void start_epoch(int64_t step, int64_t examples);
  void update(int epoch, int64_t step, double loss, double accuracy, int64_t examples);
  /// Where the steps' input comes from: `wait_seconds` gives the time steps have waited for it
  /// so far (an iterator's, get_iterator_stats), or a negative number when it cannot tell. The
  /// line then shows the share of the epoch's time spent waiting for input ("input 3%"): more
  /// than a few percent, and training is input-bound.
  void set_input_wait(std::function<double()> wait_seconds);
  /// Draws the last update's state (if it was not drawn yet) and ends the line.
  void finish();
  /// The current epoch's training time so far, in seconds, and its rate in units per second.
  double epoch_seconds() const;
  double epoch_rate() const;

private:
  void draw(const char* prefix);
  struct state {
    int epoch = 0;
    int64_t step = 0;
    double loss = 0, accuracy = -1;
    int64_t examples = 0;
    std::chrono::steady_clock::time_point when;
  };
  std::chrono::steady_clock::time_point start_, last_;
  int64_t total_steps_, start_step_ = -1, start_examples_ = 0;
  int epochs_;
  std::string unit_;
  bool terminal_;
  double log_every_s_ = 0; ///< RUNNEL_PROGRESS_EVERY: lines to a log file every this many seconds
  state latest_;
  bool have_latest_ = false, pending_ = false, dirty_ = false;
  int epoch_ = -1; ///< the epoch the rate counts from (start_step_, start_examples_, start_)
  std::function<double()> input_wait_;
  double start_wait_ = 0; ///< input_wait_() when the epoch's count started
};

/// "2.1 s" / "850 ms": a short human duration for summary lines.
std::string format_seconds(double seconds);

/// One point of a training curve; test_accuracy < 0 where the test set was not evaluated.
struct curve_point {
  int epoch;
  int64_t step;
  double train_loss, train_accuracy, test_accuracy;
};
/// A cluster's shared secret from `path` (trailing newlines dropped); errors name the file.
result<std::string> read_token(const std::string& path);
/// A ps task's life in the training apps: says so on stderr, then waits (its node serving the
/// parameters meanwhile) until SIGINT or SIGTERM.
void serve_until_signal(int task);

status write_curve_csv(const std::string& path, const std::vector<curve_point>& points);
/// Loss (left axis) and accuracies (right axis, 0..1) against the step, as a standalone SVG.
status write_curve_svg(const std::string& path, const std::string& title,
                       const std::vector<curve_point>& points);

} // namespace runnel::apps
