#pragma once
// dataset::autotune: a stage's parallelism or buffer size chosen while it runs, from what its
// consumer measures. Private to actors/data/.
//
// The consumer of a stage counts, for each element it takes, whether the element was ready or
// had to be waited for (or made on the consumer's own thread). Over windows of at least
// `min_takes` takes and `min_seconds` of wall time the tuner sees the stage's throughput and how
// often it starved its consumer. A stage that starves its consumer in more than a tenth of the
// takes is given one step more (a worker, or twice the buffer) and kept there only when the next
// windows' throughput beats the windows before by 5%; otherwise the step is taken back and not
// tried again for a number of windows that doubles with each failed try (the machine may be out
// of cores, or the stage upstream may be the bottleneck). Never above `max`: the device's thread
// budget for parallelism, a memory bound for buffers. Tuning only ever adds what pays for
// itself, so a stage whose consumer is the bottleneck stays at its start.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runnel/actors/data/stages.hpp"

namespace runnel {

/// The knob and its hill climb. observe() is called from one thread (the consumer's);
/// value() may be read from any.
class autotune_knob {
public:
  /// `multiply`: steps double the value (buffers) instead of adding one (parallelism).
  autotune_knob(int64_t start, int64_t min, int64_t max, bool multiply);

  int64_t value() const { return value_.load(std::memory_order_relaxed); }
  int64_t max() const { return max_; }
  /// Lowers the bound (a buffer whose elements turned out large), and the value with it.
  void cap(int64_t max);

  /// One window: `elements` handed on in `seconds`, `starved` of `takes` not ready when asked
  /// for. Returns true when the value changed.
  bool observe(int64_t elements, double seconds, int64_t takes, int64_t starved);

  // Windows the consumer measures before calling observe().
  static constexpr int64_t min_takes = 8;
  static constexpr double min_seconds = 0.01;

private:
  int64_t step_up(int64_t v) const;

  std::atomic<int64_t> value_;
  int64_t min_, max_;
  bool multiply_;
  // The climb: the rate at the value before the probe, the probe's windows so far, the windows
  // to sit out before probing again, and how long the next sit-out is.
  double base_rate_ = 0;
  double last_rate_ = 0;
  double probe_sum_ = 0;
  int probe_windows_ = 0;
  int64_t probe_from_ = -1;
  int cooldown_ = 0;
  int backoff_ = 2;
};

/// What the consumer of an autotuned stage counts between observe() calls.
class autotune_window {
public:
  /// One take: whether the element had to be waited for (or made by the taker).
  void take(bool starved, int64_t elements);
  /// Ends the window when it is long enough, feeding it to `knob`; true when the value changed.
  bool maybe_observe(autotune_knob& knob);

private:
  using clock = std::chrono::steady_clock;
  clock::time_point start_ = clock::now();
  int64_t takes_ = 0, starved_ = 0, elements_ = 0;
};

/// The workers a stage fans its work out to (a parallel map, the fused parse): a fixed number,
/// or, for dataset::autotune, as many as its knob asks for (1 to the cores), each started when
/// first asked for; those it no longer uses stay idle. Used from the stage's consumer thread.
class stage_workers {
public:
  /// `count`: workers (0: none, the stage works inline), or dataset::autotune.
  stage_workers(const open_context& ctx, int count);
  /// The workers in use now.
  size_t active() const { return knob_ ? size_t(knob_->value()) : workers_.size(); }
  bool empty() const { return active() == 0; }
  /// Runs `task` on the next worker in use, in turn.
  void post(std::function<void()> task);
  /// One element (or chunk) taken by the consumer: whether it had to wait for it (autotune's
  /// measure; nothing without autotune).
  void took(bool starved, int64_t elements);
  /// The knob's value (dataset::autotune), or -1.
  int64_t autotuned() const { return knob_ ? knob_->value() : -1; }
  /// Stops the workers (each finishes the task it runs).
  void stop() { workers_.clear(); }

private:
  void start(int64_t n);

  open_context ctx_;
  std::unique_ptr<autotune_knob> knob_;
  autotune_window window_;
  std::vector<std::unique_ptr<stage_worker>> workers_;
  size_t next_ = 0;
};

/// The default upper bound of an autotuned parallelism: the cores this process may use.
int64_t autotune_thread_budget();

/// What an autotuned buffer may hold, in bytes of its elements' tensors.
inline constexpr int64_t autotune_buffer_bytes = int64_t(256) << 20;

/// "parallelism autotune" / "autotune" for the stage names in stats().
std::string autotune_label(int64_t requested);

} // namespace runnel
