#pragma once
// Sidecar index files for record files, and sharded names.
//
//   throw_if_error(write_record_index("train-00000-of-00004"));  // writes train-...-00004.index
//   auto idx = read_record_index("train-00000-of-00004");         // stale or corrupt: an error
//   idx->offsets.size();                                          // record count, no scan
//   reader.seek(idx->offsets[1000]);                              // random access
//
//   shard_name("out/train", 3, 10) == "out/train-00003-of-00010"
//   expand_record_files("data/train-*-of-00005")                  // sorted, or not_found
//
// Index format: "RNLIDX01", uint64 record file size, uint64 record count, the records' uint64
// offsets in the uncompressed stream, then uint32 CRC32C of everything before it (all LE).

#include <cstdint>
#include <string>
#include <vector>

#include "runnel/ops/core/status.hpp"

namespace runnel {

struct record_index {
  uint64_t file_bytes = 0;
  std::vector<uint64_t> offsets;
};

/// The sidecar's path: `record_file + ".index"`.
std::string record_index_path(const std::string& record_file);
/// Scans `record_file` (checking every record) and writes its index atomically.
result<record_index> write_record_index(const std::string& record_file);
/// Reads and validates the index of `record_file`; not_found when there is none,
/// failed_precondition when the record file changed since it was written, data_loss when it is
/// corrupt.
result<record_index> read_record_index(const std::string& record_file);

/// "base-00003-of-00010".
std::string shard_name(const std::string& base, int shard, int num_shards);
/// Files matching a glob pattern (or the file itself), sorted; an error names the pattern.
result<std::vector<std::string>> expand_record_files(const std::string& pattern);

} // namespace runnel
