#include "runnel/storage/record_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runnel/storage/crc32c.hpp"
#include "runnel/storage/record_index.hpp"

namespace runnel {

namespace {

uint64_t load_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t load_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

/// Every byte of a record stream is covered by a record's CRC32C (its length's or its data's),
/// which the readers check; the stream's own CRC-32 (GZIP) or Adler-32 (ZLIB) over the same
/// bytes would be checked twice, and computing it took 40% of the reading thread (zlib's
/// software CRC-32 costs more than inflating these records). The trailer's length is still
/// checked, so a truncated stream is still reported.
void skip_stream_check(z_stream& zs) {
  inflateValidate(&zs, 0);
}

} // namespace

/// A byte source over a file: raw, or inflated (gzip or zlib) on the fly.
struct record_reader::impl {
  std::string path;
  record_reader_options options;
  record_compression compression = record_compression::none;
  std::FILE* file = nullptr;
  bool inflating = false;
  z_stream zs{};
  std::vector<unsigned char> in_buf = std::vector<unsigned char>(1 << 16);
  bool eof = false;
  uint64_t offset = 0; // uncompressed position of the next byte
  int64_t skipped = 0;
  /// Uncompressed files are mapped: a record is copied once, from the page cache to its string.
  const char* map = nullptr;
  size_t map_size = 0;
  /// next_view's buffer: bytes [window_start, window_start + window_len) of a raw file, read
  /// with pread; `scratch` holds what next() read for it.
  std::vector<char> window;
  uint64_t window_start = 0;
  size_t window_len = 0;
  std::string scratch;
  /// Compressed files: bytes inflated and not yet delivered, [inflated_pos, inflated_end).
  std::vector<char> inflated;
  size_t inflated_pos = 0, inflated_end = 0;

  /// Bytes [pos, pos + n) of a raw file (pos + n <= map_size), read into the window when they
  /// are not all there yet: 256 KiB at a time, or the whole span when it is larger.
  result<const char*> window_at(uint64_t pos, size_t n) {
    if (pos >= window_start && pos + n <= window_start + window_len)
      return window.data() + (pos - window_start);
    size_t want = std::max(n, std::min<size_t>(size_t(256) << 10, map_size - size_t(pos)));
    if (window.size() < want)
      window.resize(want);
    window_len = 0;
    for (size_t got = 0; got < want;) {
      ssize_t r = ::pread(fileno(file), window.data() + got, want - got, off_t(pos + got));
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return data_loss(path + ":" + std::to_string(pos + got) + ": read error: " +
                         (r < 0 ? std::strerror(errno) : "the file shrank while being read"));
      got += size_t(r);
    }
    window_start = pos;
    window_len = want;
    return window.data();
  }

  ~impl() {
    if (inflating)
      inflateEnd(&zs);
    if (map)
      munmap(const_cast<char*>(map), map_size);
    if (file)
      std::fclose(file);
  }

  /// Maps the file when it is a regular, uncompressed file; falls back to stdio otherwise.
  void try_map() {
    struct stat st {};
    if (fstat(fileno(file), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0)
      return;
    void* p = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fileno(file), 0);
    if (p == MAP_FAILED)
      return;
    madvise(p, size_t(st.st_size), MADV_SEQUENTIAL);
    madvise(p, size_t(st.st_size), MADV_WILLNEED);
    map = static_cast<const char*>(p);
    map_size = size_t(st.st_size);
  }

  /// Moves to `pos` of a raw stream.
  void set_position(uint64_t pos) {
    if (!map)
      std::fseek(file, long(pos), SEEK_SET);
    offset = pos;
  }

  /// Reads up to n bytes; returns how many (less only at the end of the stream).
  result<size_t> read(char* dst, size_t n) {
    if (map) {
      size_t got = offset >= map_size ? 0 : std::min<size_t>(n, map_size - size_t(offset));
      std::memcpy(dst, map + offset, got);
      offset += got;
      return got;
    }
    if (!inflating) {
      size_t got = std::fread(dst, 1, n, file);
      if (got < n && std::ferror(file))
        return data_loss(path + ": read error: " + std::strerror(errno));
      offset += got;
      return got;
    }
    // Inflated bytes go through `inflated`: a record's 12-byte header, data and footer are
    // copies out of it, not three calls into zlib each.
    size_t got = 0;
    while (got < n) {
      if (inflated_pos == inflated_end) {
        inflated_pos = inflated_end = 0;
        RUNNEL_ASSIGN_OR_RETURN(bool more, inflate_more());
        if (!more)
          break;
      }
      size_t k = std::min(n - got, inflated_end - inflated_pos);
      std::memcpy(dst + got, inflated.data() + inflated_pos, k);
      inflated_pos += k;
      got += k;
    }
    offset += got;
    return got;
  }

  /// Inflates more after the bytes not yet delivered (moved to the buffer's front first), 256
  /// KiB at a time, or as much again when the buffer is full of them; false when the compressed
  /// stream gave nothing more.
  result<bool> inflate_more() {
    if (inflated_pos > 0) {
      std::memmove(inflated.data(), inflated.data() + inflated_pos, inflated_end - inflated_pos);
      inflated_end -= inflated_pos;
      inflated_pos = 0;
    }
    if (inflated.size() < (size_t(256) << 10))
      inflated.resize(size_t(256) << 10);
    else if (inflated_end == inflated.size())
      inflated.resize(2 * inflated.size());
    RUNNEL_ASSIGN_OR_RETURN(size_t got,
                            inflate_into(inflated.data() + inflated_end,
                                         inflated.size() - inflated_end, offset + inflated_end));
    inflated_end += got;
    return got > 0;
  }

  /// Up to n inflated bytes into dst (fewer only at the end of the stream); `at` is dst's
  /// offset in the uncompressed stream, for errors.
  result<size_t> inflate_into(char* dst, size_t n, uint64_t at) {
    size_t got = 0;
    while (got < n) {
      if (zs.avail_in == 0 && !eof) {
        size_t r = std::fread(in_buf.data(), 1, in_buf.size(), file);
        if (r == 0)
          eof = true;
        zs.next_in = in_buf.data();
        zs.avail_in = unsigned(r);
      }
      zs.next_out = reinterpret_cast<unsigned char*>(dst + got);
      zs.avail_out = unsigned(std::min<size_t>(n - got, UINT32_MAX));
      unsigned before = zs.avail_out;
      int rc = inflate(&zs, Z_NO_FLUSH);
      got += before - zs.avail_out;
      if (rc == Z_STREAM_END) {
        // Concatenated gzip members are allowed: reset and go on if input remains.
        if (zs.avail_in == 0) {
          size_t r = std::fread(in_buf.data(), 1, in_buf.size(), file);
          zs.next_in = in_buf.data();
          zs.avail_in = unsigned(r);
        }
        if (zs.avail_in == 0)
          break;
        inflateReset(&zs);
        skip_stream_check(zs);
        continue;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR)
        return data_loss(path + ": corrupt " +
                         std::string(compression == record_compression::gzip ? "GZIP" : "ZLIB") +
                         " stream near uncompressed offset " + std::to_string(at + got) + ": " +
                         (zs.msg ? zs.msg : "inflate failed"));
      if (rc == Z_BUF_ERROR && zs.avail_in == 0 && eof)
        break; // truncated compressed stream: report as a short read
    }
    return got;
  }
};

record_reader::record_reader(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
record_reader::record_reader(record_reader&&) noexcept = default;
record_reader& record_reader::operator=(record_reader&&) noexcept = default;
record_reader::~record_reader() = default;
uint64_t record_reader::offset() const {
  return impl_->offset;
}
int64_t record_reader::skipped() const {
  return impl_->skipped;
}

status record_reader::seek(uint64_t target) {
  auto& d = *impl_;
  if (d.map) {
    if (target > d.map_size)
      return out_of_range(d.path + ": cannot seek to " + std::to_string(target) +
                          ", past the end (" + std::to_string(d.map_size) + " bytes)");
    d.offset = target;
    return {};
  }
  if (!d.inflating) {
    if (std::fseek(d.file, long(target), SEEK_SET) != 0)
      return out_of_range(d.path + ": cannot seek to " + std::to_string(target));
    d.offset = target;
    return {};
  }
  if (target < d.offset) { // restart the stream
    std::rewind(d.file);
    inflateReset(&d.zs);
    skip_stream_check(d.zs);
    d.zs.avail_in = 0;
    d.eof = false;
    d.offset = 0;
    d.inflated_pos = d.inflated_end = 0;
  }
  char buf[1 << 14];
  while (d.offset < target) {
    size_t want = size_t(std::min<uint64_t>(sizeof buf, target - d.offset));
    RUNNEL_ASSIGN_OR_RETURN(size_t got, d.read(buf, want));
    if (got < want)
      return out_of_range(d.path + ": offset " + std::to_string(target) + " is past the end");
  }
  return {};
}
bool record_reader::mapped() const {
  return impl_->map != nullptr;
}

result<bool> record_reader::next_span(uint64_t& data_offset, uint64_t& length) {
  auto& d = *impl_;
  if (!d.map)
    return failed_precondition(d.path + ": next_span needs an uncompressed (mapped) file");
  uint64_t start = d.offset;
  if (start >= d.map_size)
    return false;
  if (d.map_size - start < 12)
    return data_loss(d.path + ":" + std::to_string(start) + ": truncated record header (" +
                     std::to_string(d.map_size - start) + " of 12 bytes)");
  const char* header = d.map + start;
  uint64_t len = load_u64(header);
  if (mask_crc(crc32c(header, 8)) != load_u32(header + 8) || len > d.options.max_record_bytes)
    return data_loss(d.path + ":" + std::to_string(start) + ": bad length CRC (the length field " +
                     std::to_string(len) + " is corrupt, or this is not a record file)");
  if (d.map_size - start - 12 < len + 4)
    return data_loss(d.path + ":" + std::to_string(start) + ": truncated record: " +
                     std::to_string(len) + " bytes of data announced, file ends after " +
                     std::to_string(d.map_size - start - 12));
  data_offset = start + 12;
  length = len;
  d.offset = start + 12 + len + 4;
  return true;
}

result<std::string_view> record_reader::checked_view(uint64_t data_offset,
                                                     uint64_t length) const {
  auto& d = *impl_;
  if (!d.map || data_offset + length + 4 > d.map_size)
    return out_of_range(d.path + ": no record data at " + std::to_string(data_offset));
  std::string_view data(d.map + data_offset, size_t(length));
  if (mask_crc(crc32c(data.data(), data.size())) != load_u32(d.map + data_offset + length))
    return data_loss(d.path + ":" + std::to_string(data_offset - 12) +
                     ": bad data CRC in a record of " + std::to_string(length) + " bytes");
  return data;
}

record_compression record_reader::compression() const {
  return impl_->compression;
}
const std::string& record_reader::path() const {
  return impl_->path;
}

result<record_reader> record_reader::open(const std::string& path, record_reader_options options) {
  auto d = std::make_unique<impl>();
  d->path = path;
  d->options = options;
  d->file = std::fopen(path.c_str(), "rb");
  if (!d->file)
    return not_found("cannot open record file " + path + ": " + std::strerror(errno));
  auto c = options.compression;
  if (c == record_compression::automatic) {
    // A raw file starts with a length whose masked CRC checks out; otherwise look for the
    // GZIP magic or a ZLIB header.
    unsigned char head[12];
    size_t n = std::fread(head, 1, sizeof head, d->file);
    std::rewind(d->file);
    c = record_compression::none;
    bool raw_ok =
        n == 12 && mask_crc(crc32c(head, 8)) == load_u32(reinterpret_cast<const char*>(head + 8));
    if (!raw_ok && n >= 2) {
      if (head[0] == 0x1f && head[1] == 0x8b)
        c = record_compression::gzip;
      else if ((head[0] & 0x0f) == 8 && ((head[0] << 8) | head[1]) % 31 == 0)
        c = record_compression::zlib;
    }
  }
  d->compression = c;
  if (c == record_compression::none)
    d->try_map();
  if (c == record_compression::gzip || c == record_compression::zlib) {
    d->inflating = true;
    if (inflateInit2(&d->zs, c == record_compression::gzip ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK)
      return internal_error("cannot start zlib");
    skip_stream_check(d->zs);
  }
  return record_reader(std::move(d));
}

result<bool> record_reader::next(std::string& out) {
  auto& d = *impl_;
  for (;;) {
    uint64_t start = d.offset;
    char header[12];
    RUNNEL_ASSIGN_OR_RETURN(size_t got, d.read(header, 12));
    if (got == 0)
      return false;
    auto corrupt = [&](const std::string& what) -> result<bool> {
      return data_loss(d.path + ":" + std::to_string(start) + ": " + what);
    };
    if (got < 12) {
      if (d.options.skip_corrupt) {
        ++d.skipped;
        return false;
      }
      return corrupt("truncated record header (" + std::to_string(got) + " of 12 bytes)");
    }
    uint64_t len = load_u64(header);
    if (mask_crc(crc32c(header, 8)) != load_u32(header + 8) || len > d.options.max_record_bytes) {
      if (d.options.skip_corrupt && !d.inflating) {
        // Resynchronise byte by byte: the next valid header starts somewhere after this one.
        ++d.skipped;
        d.set_position(start + 1);
        continue;
      }
      return corrupt("bad length CRC (the length field " + std::to_string(len) +
                     " is corrupt, or this is not a record file)");
    }
    size_t data_got = 0;
    if (d.map) { // one copy, without zero-filling the string first
      data_got = size_t(std::min<uint64_t>(len, d.map_size - d.offset));
      out.assign(d.map + d.offset, data_got);
      d.offset += data_got;
    } else {
      // The buffer grows with the bytes that arrive (1 MiB, then doubling): a damaged or hostile
      // length field that passed its CRC cannot make a short file allocate gigabytes.
      out.clear();
      while (data_got < len) {
        size_t next = size_t(std::min<uint64_t>(len, std::max<uint64_t>(2 * data_got, 1 << 20)));
        out.resize(next);
        RUNNEL_ASSIGN_OR_RETURN(size_t n, d.read(out.data() + data_got, next - data_got));
        data_got += n;
        if (data_got < next)
          break; // the stream ended
      }
    }
    char footer[4];
    size_t foot_got = 0;
    if (data_got == len) {
      RUNNEL_ASSIGN_OR_RETURN(foot_got, d.read(footer, 4));
    }
    if (data_got < len || foot_got < 4) {
      if (d.options.skip_corrupt) {
        ++d.skipped;
        return false;
      }
      return corrupt("truncated record: " + std::to_string(len) +
                     " bytes of data announced, file ends after " + std::to_string(data_got));
    }
    if (mask_crc(crc32c(out.data(), len)) != load_u32(footer)) {
      if (d.options.skip_corrupt) {
        ++d.skipped;
        continue;
      }
      return corrupt("bad data CRC in a record of " + std::to_string(len) + " bytes");
    }
    return true;
  }
}

namespace {

/// next_view's way for whatever is not a well-formed record in its buffer: next(), which
/// reports or skips it, into the reader's scratch string.
result<bool> through_next(record_reader& r, record_reader::impl& d, std::string_view& out) {
  RUNNEL_ASSIGN_OR_RETURN(bool more, r.next(d.scratch));
  out = d.scratch;
  return more;
}

} // namespace

result<bool> record_reader::next_view(std::string_view& out) {
  auto& d = *impl_;
  auto through_next = [&] { return runnel::through_next(*this, d, out); };
  if (d.inflating)
    return inflated_view(out);
  uint64_t start = d.offset;
  if (!d.map || start >= d.map_size || d.map_size - start < 16)
    return through_next();
  RUNNEL_ASSIGN_OR_RETURN(const char* header, d.window_at(start, 12));
  uint64_t len = load_u64(header);
  if (mask_crc(crc32c(header, 8)) != load_u32(header + 8) || len > d.options.max_record_bytes ||
      d.map_size - start - 16 < len)
    return through_next();
  RUNNEL_ASSIGN_OR_RETURN(header, d.window_at(start, size_t(len) + 16));
  const char* data = header + 12;
  if (mask_crc(crc32c(data, size_t(len))) != load_u32(data + len))
    return through_next();
  d.offset = start + 16 + len;
  out = std::string_view(data, size_t(len));
  return true;
}

result<bool> record_reader::inflated_view(std::string_view& out) {
  auto& d = *impl_;
  auto through_next = [&] { return runnel::through_next(*this, d, out); };
  // The record framed in the inflated bytes, when it is all there (inflating more to get it);
  // anything else goes through next().
  auto have = [&] { return d.inflated_end - d.inflated_pos; };
  auto ensure = [&](size_t n) -> result<bool> {
    while (have() < n) {
      RUNNEL_ASSIGN_OR_RETURN(bool more, d.inflate_more());
      if (!more)
        return false;
    }
    return true;
  };
  RUNNEL_ASSIGN_OR_RETURN(bool whole, ensure(12));
  if (!whole)
    return through_next();
  uint64_t len = load_u64(d.inflated.data() + d.inflated_pos);
  if (mask_crc(crc32c(d.inflated.data() + d.inflated_pos, 8)) !=
          load_u32(d.inflated.data() + d.inflated_pos + 8) ||
      len > d.options.max_record_bytes || len > (uint64_t(64) << 20))
    return through_next();
  RUNNEL_ASSIGN_OR_RETURN(whole, ensure(size_t(len) + 16));
  if (!whole)
    return through_next();
  const char* data = d.inflated.data() + d.inflated_pos + 12; // (inflate_more may move it)
  if (mask_crc(crc32c(data, size_t(len))) != load_u32(data + len))
    return through_next();
  d.inflated_pos += size_t(len) + 16;
  d.offset += len + 16;
  out = std::string_view(data, size_t(len));
  return true;
}

struct record_writer::impl {
  std::string path;
  std::FILE* file = nullptr;
  gzFile gz = nullptr;
  bool closed = false;
  ~impl() {
    if (gz)
      gzclose(gz);
    if (file)
      std::fclose(file);
  }
};

record_writer::record_writer(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
record_writer::record_writer(record_writer&&) noexcept = default;
record_writer& record_writer::operator=(record_writer&&) noexcept = default;
record_writer::~record_writer() {
  if (impl_ && !impl_->closed)
    (void)close();
}

result<record_writer> record_writer::open(const std::string& path, record_compression c) {
  auto d = std::make_unique<impl>();
  d->path = path;
  if (c == record_compression::gzip) {
    d->gz = gzopen(path.c_str(), "wb6");
    if (!d->gz)
      return unavailable("cannot create " + path + ": " + std::strerror(errno));
  } else if (c == record_compression::zlib) {
    return unimplemented("writing ZLIB record files is not supported yet (GZIP is)");
  } else {
    d->file = std::fopen(path.c_str(), "wb");
    if (!d->file)
      return unavailable("cannot create " + path + ": " + std::strerror(errno));
  }
  return record_writer(std::move(d));
}

status record_writer::write(std::string_view record) {
  auto& d = *impl_;
  if (d.closed)
    return failed_precondition("record file " + d.path + " is closed");
  char header[12];
  uint64_t len = record.size();
  std::memcpy(header, &len, 8);
  uint32_t lc = mask_crc(crc32c(header, 8)), dc = mask_crc(crc32c(record.data(), record.size()));
  std::memcpy(header + 8, &lc, 4);
  char footer[4];
  std::memcpy(footer, &dc, 4);
  bool ok;
  if (d.gz)
    ok = gzwrite(d.gz, header, 12) == 12 &&
         (record.empty() ||
          gzwrite(d.gz, record.data(), unsigned(record.size())) == int(record.size())) &&
         gzwrite(d.gz, footer, 4) == 4;
  else
    ok = std::fwrite(header, 1, 12, d.file) == 12 &&
         std::fwrite(record.data(), 1, record.size(), d.file) == record.size() &&
         std::fwrite(footer, 1, 4, d.file) == 4;
  return ok ? status{} : unavailable("writing " + d.path + " failed: " + std::strerror(errno));
}

status record_writer::flush() {
  auto& d = *impl_;
  if (d.closed)
    return failed_precondition("record file " + d.path + " is closed");
  bool ok = d.gz ? gzflush(d.gz, Z_SYNC_FLUSH) == Z_OK : std::fflush(d.file) == 0;
  return ok ? status{} : unavailable("flushing " + d.path + " failed: " + std::strerror(errno));
}

status record_writer::close() {
  auto& d = *impl_;
  if (d.closed)
    return {};
  d.closed = true;
  if (d.gz) {
    int rc = gzclose(d.gz);
    d.gz = nullptr;
    if (rc != Z_OK)
      return unavailable("closing " + d.path + " failed");
  } else if (d.file) {
    int rc = std::fclose(d.file);
    d.file = nullptr;
    if (rc != 0)
      return unavailable("closing " + d.path + " failed: " + std::strerror(errno));
  }
  return {};
}

result<int64_t> count_records(const std::string& path, bool use_index) {
  if (use_index)
    if (auto idx = read_record_index(path))
      return int64_t(idx->offsets.size());
  return count_records(path);
}

result<int64_t> count_records(const std::string& path) {
  RUNNEL_ASSIGN_OR_RETURN(auto r, record_reader::open(path));
  std::string rec;
  int64_t n = 0;
  for (;;) {
    RUNNEL_ASSIGN_OR_RETURN(bool more, r.next(rec));
    if (!more)
      return n;
    ++n;
  }
}

} // namespace runnel
