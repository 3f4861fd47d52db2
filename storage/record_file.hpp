#pragma once
// TFRecord-compatible record files.
//
//   auto w = record_writer::open("train.tfrecord.gz", record_compression::gzip).value();
//   throw_if_error(w.write("payload"));
//   throw_if_error(w.close());
//
//   auto r = record_reader::open("train.tfrecord.gz").value();   // compression detected
//   std::string rec;
//   while (true) {
//     auto more = r.next(rec);          // false at the end; data_loss names file and offset
//     if (!more) return more.error();
//     if (!*more) break;
//   }
//
// Framing: uint64 length (LE), uint32 masked CRC32C of those 8 bytes, the data, uint32 masked
// CRC32C of the data; optionally GZIP or ZLIB around the whole stream. Offsets in errors are
// byte offsets into the (uncompressed) record stream.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "runnel/ops/core/status.hpp"

namespace runnel {

enum class record_compression { none, zlib, gzip, automatic };

struct record_reader_options {
  record_compression compression = record_compression::automatic;
  /// Skip corrupt records (counted in skipped()) instead of failing; a truncated tail ends the
  /// file.
  bool skip_corrupt = false;
  /// Records larger than this are treated as corruption (a garbage length field).
  uint64_t max_record_bytes = uint64_t(1) << 32;
};

class record_reader {
public:
  static result<record_reader> open(const std::string& path, record_reader_options options = {});
  record_reader(record_reader&&) noexcept;
  record_reader& operator=(record_reader&&) noexcept;
  ~record_reader();

  /// Reads the next record into `out`: true, false at a clean end, or an error.
  result<bool> next(std::string& out);
  /// The next record as a view valid until the next call on this reader, its CRCs checked:
  /// true, false at a clean end, or an error (as next()). Uncompressed files are read with
  /// pread into a reused buffer, so no page is faulted in and the CRC runs over bytes the read
  /// just left in cache; compressed files are inflated 256 KiB at a time and their records
  /// framed in place; damaged records go through next(), which reports or skips them.
  result<bool> next_view(std::string_view& out);
  /// Offset of the next record in the uncompressed stream.
  uint64_t offset() const;
  /// Continues reading at `offset` (a record's offset, e.g. from an index): a seek for raw
  /// files, decompression up to it for compressed ones.
  status seek(uint64_t offset);
  int64_t skipped() const;

  /// Random access for uncompressed files, which are mapped into memory: `next_span` checks the
  /// next record's header and skips over it, giving where its data lies (the event tools read
  /// a file's records in place this way).
  bool mapped() const;
  result<bool> next_span(uint64_t& data_offset, uint64_t& length);
  /// The mapped data of a span, without a copy, after checking its CRC (for parsing in place).
  result<std::string_view> checked_view(uint64_t data_offset, uint64_t length) const;
  record_compression compression() const;
  const std::string& path() const;

  struct impl;

private:
  explicit record_reader(std::unique_ptr<impl> i);
  result<bool> inflated_view(std::string_view& out); // next_view of a compressed file
  std::unique_ptr<impl> impl_;
};

class record_writer {
public:
  /// Writes to `path` (created or truncated).
  static result<record_writer> open(const std::string& path,
                                    record_compression compression = record_compression::none);
  record_writer(record_writer&&) noexcept;
  record_writer& operator=(record_writer&&) noexcept;
  ~record_writer();

  status write(std::string_view record);
  /// Hands what was written to the operating system (readers of the growing file see it).
  status flush();
  /// Flushes and closes; errors (a full disk) are reported here, not lost.
  status close();

  struct impl;

private:
  explicit record_writer(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

/// Counts the records of a file (reading and checking every one).
result<int64_t> count_records(const std::string& path);
/// The same, from a fresh sidecar index when `use_index` and there is one.
result<int64_t> count_records(const std::string& path, bool use_index);

} // namespace runnel
