#pragma once
// Record-file tools behind `runnel records convert|stats`.
#include <map>
#include <string>
#include <vector>

#include "runnel/apps/support/work_progress.hpp"
#include "runnel/storage/example.hpp"
#include "runnel/storage/record_file.hpp"

namespace runnel::apps {

/// idx images + labels (MNIST format) -> Examples {image_raw: bytes, label, height, width:
/// int64} in `shards` files named `out_base-0000i-of-0000n`. Returns the files written.
result<std::vector<std::string>> convert_idx(const std::string& images, const std::string& labels,
                                             const std::string& out_base, int shards,
                                             record_compression c);
/// CSV with a header row -> one Example per row, one feature per column (int64 when every value
/// is an integer, float when numeric, else bytes).
result<std::vector<std::string>> convert_csv(const std::string& csv, const std::string& out_base,
                                             int shards, record_compression c);
/// What a record's payload is. An Example has only field 1 (features); a SequenceExample has
/// field 2 (feature_lists) too. Anything whose decoded feature names are not printable UTF-8
/// text (ExampleListWithContext, another protobuf, arbitrary bytes) is `other`.
struct decoded_record {
  enum class kind { example, sequence_example, other } what = kind::other;
  feature_map example;
  sequence_example sequence;
};
decoded_record classify_record(std::string_view record);
/// The record as one JSON line: an Example's features, a SequenceExample's context and feature
/// lists, or {"raw_base64": ..., "payload": "not an Example or SequenceExample"}.
std::string record_to_json(std::string_view record, bool raw);

/// Per feature over all Examples (and SequenceExamples' contexts): kind, records carrying it,
/// list length range, value range.
struct feature_stats {
  feature_kind kind = feature_kind::floats;
  int64_t records = 0;
  size_t min_len = 0, max_len = 0;
  double lo = 0, hi = 0; ///< the values' range; for bytes features, their sizes' range
  bool has_values = false;
};
struct records_summary {
  int64_t records = 0, sequence_examples = 0, other = 0;
  std::map<std::string, feature_stats> features;
};
/// With a progress line on long work (work_progress).
result<records_summary> record_stats(const std::vector<std::string>& files);
std::string format_record_stats(const records_summary& s);
std::string record_stats_json(const records_summary& s);

/// The files' sizes on disk, summed (for work_progress).
uint64_t total_file_bytes(const std::vector<std::string>& files);
/// Counts one file's records in a work_progress: a raw file's records as their bytes on disk,
/// and, when the file is done, whatever of its size was not counted (all of a compressed one).
class file_progress {
public:
  file_progress(work_progress& p, const std::string& file, bool raw);
  ~file_progress();
  void add(size_t record_bytes) {
    uint64_t b = raw_ ? record_bytes + 16 : 0; // framing: length, its CRC, the data's CRC
    counted_ += b;
    progress_.add(b);
  }

private:
  work_progress& progress_;
  bool raw_;
  uint64_t size_ = 0, counted_ = 0;
};

} // namespace runnel::apps
