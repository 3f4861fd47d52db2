#pragma once
// Sorted string tables in LevelDB's format, as TensorFlow's lib/io/table writes the `.index` file
// of a V2 checkpoint: data blocks of prefix-compressed keys with restart points, each followed
// by a one-byte compression type (0 none, 1 raw snappy) and the masked CRC32C of the block and
// that byte; an index block mapping a separator key to each data block's handle; an empty
// metaindex block; a 48-byte footer of the two handles and the magic 0xdb4775248b80fb57.
//
//   table_builder b;                                      // keys added in increasing order
//   throw_if_error(b.add("", header_bytes));
//   throw_if_error(b.add("w", entry_bytes));
//   std::string bytes = b.finish();
//   auto entries = read_table(bytes, "model.ckpt-1.index");  // every (key, value), in order
//
// Reading checks every block's checksum and bounds; an error names the file and the byte offset
// of the block at fault.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runnel/ops/core/status.hpp"

namespace runnel::tf {

struct table_options {
  /// A data block is closed once it holds this many bytes (TensorFlow's default).
  size_t block_size = 256 * 1024;
  /// Keys between restart points (full keys), as LevelDB's default.
  int restart_interval = 16;
  /// Compress blocks with snappy where that saves an eighth (TensorFlow writes checkpoints
  /// uncompressed; its reader takes both).
  bool snappy = false;
};

class table_builder {
public:
  explicit table_builder(table_options options = {});
  /// Keys must increase strictly (bytewise); a key out of order is an invalid_argument naming it.
  status add(std::string_view key, std::string_view value);
  /// The table's bytes; the builder is spent.
  std::string finish();

private:
  struct block {
    std::string bytes;
    std::vector<uint32_t> restarts{0};
    std::string last_key;
    int since_restart = 0;
    size_t entries = 0;
  };
  void add_to(block& b, std::string_view key, std::string_view value, int interval);
  /// Appends `b` with its trailer; returns its handle, encoded.
  std::string write_block(block& b);
  void flush_data();

  table_options options_;
  std::string out_;
  block data_, index_;
  std::string last_key_;
  std::string pending_handle_; // of the last data block, until its index key is known
  bool pending_ = false;
  bool any_ = false;
};

/// LevelDB's (and protobuf's) varint: appended to `out`; read at `pos` of `s`, moving `pos` past
/// it (false when cut short or longer than 64 bits).
void append_varint64(std::string& out, uint64_t v);
bool read_varint64(std::string_view s, size_t& pos, uint64_t& v);

/// Every (key, value) of a table held in `bytes`, in key order. `what` names the file in errors.
result<std::vector<std::pair<std::string, std::string>>> read_table(std::string_view bytes,
                                                                    const std::string& what);

} // namespace runnel::tf
