#pragma once
// Record-file tools behind `runnel records convert|stats`.
#include <string>
#include <vector>

#include "storage/record_file.hpp"

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
/// Per feature: kind, records carrying it, list length range, value range.
result<std::string> record_stats(const std::vector<std::string>& files);

} // namespace runnel::apps
