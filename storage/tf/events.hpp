#pragma once
// TensorBoard event files: a summary_writer appends Events (TFRecord-framed tensorflow.Event
// messages) to logdir/events.out.tfevents.<seconds>.<hostname>, and an event_reader reads them
// back, whether Runnel or TensorFlow wrote them.
//
//   auto w = summary_writer::open("logs/run1");          // creates the folder
//   throw_if_error(w->add_graph(g));                     // TensorBoard's graph view
//   throw_if_error(w->add_scalar("loss", 0.42, step));
//   throw_if_error(w->add_summary(merged_summary_string, step));  // from the summary ops
//   throw_if_error(w->close());
//
// The first record is {file_version: "brain.Event:2"}. Writes are flushed at least every
// `flush_seconds` and on close, so TensorBoard sees a running job's progress.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

class kernel_registry;
/// The kernels of the summary ops (ops/layers/summary.hpp).
void register_summary_kernels(kernel_registry& reg);

class summary_writer {
public:
  /// Creates `logdir` (and its parents) and a new event file in it.
  static result<summary_writer> open(const std::string& logdir, double flush_seconds = 2.0);
  summary_writer(summary_writer&&) noexcept;
  summary_writer& operator=(summary_writer&&) noexcept;
  ~summary_writer();

  const std::string& path() const;
  /// A serialized tensorflow.Summary (what the summary ops produce) at `step`.
  status add_summary(std::string_view serialized, int64_t step);
  status add_scalar(std::string_view tag, double value, int64_t step);
  /// The graph, exported as a TensorFlow GraphDef.
  status add_graph(const graph& g);
  status flush();
  /// Flushes and closes; errors (a full disk) are reported here, not lost.
  status close();

  struct impl;

private:
  explicit summary_writer(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

/// One value of an event's summary, as event_reader reports it.
struct summary_entry {
  enum class kind { scalar, histogram, image, text, tensor, audio, other } what = kind::other;
  std::string tag;
  double value = 0;        ///< scalar: the value
  bool float32 = false;    ///< the value was stored as a float32 (print it as one)
  std::string description; ///< the others: "histogram of 1000 values in [-1.2, 3]", ...
};

/// One event.
struct event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;         ///< set on the first event of a file
  std::optional<int64_t> graph_nodes; ///< a graph_def event: its node count
  std::vector<summary_entry> values;  ///< a summary event
  std::string other;                  ///< "session_log", "log_message", ... for the rest
};

/// Decodes one record of an event file into `out` (reusing its memory); what event_reader::next
/// does after reading the record. Safe to call from several threads at once.
status decode_event(std::string_view record, event& out);

/// Reads the events of one file in order; errors name the file and the record's byte offset.
class event_reader {
public:
  static result<event_reader> open(const std::string& path);
  event_reader(event_reader&&) noexcept;
  event_reader& operator=(event_reader&&) noexcept;
  ~event_reader();
  /// The next event, or false at the end of the file.
  result<bool> next(event& out);
  /// The next record undecoded (for decoding elsewhere, e.g. on other threads), and its byte
  /// offset in the file.
  result<bool> next_record(std::string& record, uint64_t& offset);
  /// Uncompressed files are mapped: `next_span` finds the next record (checking its header) and
  /// `view` gives its bytes in place after checking their CRC; `view` may be called from several
  /// threads at once.
  bool mapped() const;
  result<bool> next_span(uint64_t& data_offset, uint64_t& length);
  result<std::string_view> view(uint64_t data_offset, uint64_t length) const;

  struct impl;

private:
  explicit event_reader(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

} // namespace runnel
