#include "runnel/storage/tf/sstable.hpp"

#include <snappy.h>

#include <algorithm>
#include <cstring>

#include "runnel/storage/crc32c.hpp"

namespace runnel::tf {

namespace {

constexpr uint64_t table_magic = 0xdb4775248b80fb57ull;
constexpr size_t footer_bytes = 48;     // two handles padded to 40 bytes, then the magic
constexpr size_t trailer_bytes = 5;     // compression type, masked CRC32C
constexpr size_t max_block = 256 << 20; // a block that says it is larger is corrupt

void put_fixed32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(char((v >> (8 * i)) & 0xff));
}

uint32_t get_fixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t(uint8_t(p[i])) << (8 * i);
  return v;
}

std::string at(const std::string& what, uint64_t offset) {
  return what + " at byte offset " + std::to_string(offset);
}

struct handle {
  uint64_t offset = 0, size = 0;
};

/// The contents of the block at `h`, checked and uncompressed.
result<std::string> read_block(std::string_view file, handle h, const std::string& what) {
  uint64_t end = file.size() - footer_bytes;
  if (h.offset > end || h.size > end - h.offset || end - h.offset - h.size < trailer_bytes)
    return data_loss(at(what, h.offset) + ": a block of " + std::to_string(h.size) +
                     " bytes runs past the table's end (" + std::to_string(file.size()) +
                     " bytes): the file is truncated or corrupt");
  const char* p = file.data() + h.offset;
  uint8_t type = uint8_t(p[h.size]);
  uint32_t stored = unmask_crc(get_fixed32(p + h.size + 1));
  uint32_t actual = crc32c(p, h.size + 1); // the contents and the type byte
  if (stored != actual)
    return data_loss(at(what, h.offset) + ": block checksum mismatch (stored " +
                     std::to_string(stored) + ", computed " + std::to_string(actual) + ")");
  if (type == 0)
    return std::string(p, h.size);
  if (type != 1)
    return data_loss(at(what, h.offset) + ": unknown block compression type " +
                     std::to_string(type) + " (0: none, 1: snappy)");
  size_t n = 0;
  if (!snappy::GetUncompressedLength(p, h.size, &n) || n > max_block)
    return data_loss(at(what, h.offset) + ": a snappy block with a bad length header");
  std::string out(n, '\0');
  if (!snappy::RawUncompress(p, h.size, out.data()))
    return data_loss(at(what, h.offset) + ": a snappy block that does not decompress");
  return out;
}

/// The entries of a block's contents (read from `offset` of the file, for errors).
status parse_block(const std::string& b, uint64_t offset, const std::string& what,
                   std::vector<std::pair<std::string, std::string>>& out) {
  if (b.size() < 4)
    return data_loss(at(what, offset) + ": a block of " + std::to_string(b.size()) +
                     " bytes, too short for its restart count");
  uint64_t restarts = get_fixed32(b.data() + b.size() - 4);
  if (restarts == 0 || restarts > (b.size() - 4) / 4)
    return data_loss(at(what, offset) + ": a block claims " + std::to_string(restarts) +
                     " restart points, which its " + std::to_string(b.size()) +
                     " bytes cannot hold");
  std::string_view entries(b.data(), b.size() - 4 - 4 * restarts);
  std::string key;
  size_t pos = 0;
  while (pos < entries.size()) {
    size_t start = pos;
    uint64_t shared = 0, unshared = 0, value = 0;
    if (!read_varint64(entries, pos, shared) || !read_varint64(entries, pos, unshared) ||
        !read_varint64(entries, pos, value) || shared > key.size() ||
        unshared > entries.size() - pos || value > entries.size() - pos - unshared)
      return data_loss(at(what, offset) + ": a corrupt entry " + std::to_string(start) +
                       " bytes into the block");
    key.resize(shared);
    key.append(entries.data() + pos, unshared);
    pos += unshared;
    if (!out.empty() && out.back().first >= key)
      return data_loss(at(what, offset) + ": keys out of order ('" + out.back().first +
                       "' before '" + key + "')");
    out.emplace_back(key, std::string(entries.data() + pos, value));
    pos += value;
  }
  return {};
}

result<handle> decode_handle(std::string_view s, size_t& pos, const std::string& what,
                             uint64_t offset) {
  handle h;
  if (!read_varint64(s, pos, h.offset) || !read_varint64(s, pos, h.size))
    return data_loss(at(what, offset) + ": a corrupt block handle");
  return h;
}

} // namespace

void append_varint64(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(v | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}

bool read_varint64(std::string_view s, size_t& pos, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && pos < s.size(); shift += 7) {
    uint8_t b = uint8_t(s[pos++]);
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80))
      return true;
  }
  return false;
}

table_builder::table_builder(table_options options) : options_(options) {}

void table_builder::add_to(block& b, std::string_view key, std::string_view value, int interval) {
  size_t shared = 0;
  if (b.since_restart < interval) {
    while (shared < key.size() && shared < b.last_key.size() && key[shared] == b.last_key[shared])
      ++shared;
  } else {
    b.restarts.push_back(uint32_t(b.bytes.size()));
    b.since_restart = 0;
  }
  append_varint64(b.bytes, shared);
  append_varint64(b.bytes, key.size() - shared);
  append_varint64(b.bytes, value.size());
  b.bytes.append(key.substr(shared));
  b.bytes.append(value);
  b.last_key.assign(key);
  ++b.since_restart;
  ++b.entries;
}

std::string table_builder::write_block(block& b) {
  std::string contents = std::move(b.bytes);
  for (auto r : b.restarts)
    put_fixed32(contents, r);
  put_fixed32(contents, uint32_t(b.restarts.size()));
  char type = 0;
  if (options_.snappy) {
    std::string packed;
    snappy::Compress(contents.data(), contents.size(), &packed);
    if (packed.size() < contents.size() - contents.size() / 8) {
      contents = std::move(packed);
      type = 1;
    }
  }
  std::string h;
  append_varint64(h, out_.size());
  append_varint64(h, contents.size());
  contents.push_back(type);
  uint32_t crc = mask_crc(crc32c(contents.data(), contents.size()));
  out_.append(contents);
  put_fixed32(out_, crc);
  b = block{};
  return h;
}

void table_builder::flush_data() {
  if (data_.entries == 0)
    return;
  pending_handle_ = write_block(data_);
  pending_ = true;
}

status table_builder::add(std::string_view key, std::string_view value) {
  if (any_ && key <= std::string_view(last_key_))
    return invalid_argument("table: key '" + std::string(key) + "' added after '" + last_key_ +
                            "' (keys must increase)");
  if (pending_) {
    // The index key of the block just closed: short, >= its keys and < this one (LevelDB's
    // bytewise FindShortestSeparator), so that the bytes are TensorFlow's.
    std::string separator = last_key_;
    size_t i = 0, n = std::min(separator.size(), key.size());
    while (i < n && separator[i] == key[i])
      ++i;
    if (i < n) {
      auto b = uint8_t(separator[i]);
      if (b < 0xff && b + 1 < uint8_t(key[i])) {
        separator[i] = char(b + 1);
        separator.resize(i + 1);
      }
    }
    add_to(index_, separator, pending_handle_, 1);
    pending_ = false;
  }
  any_ = true;
  last_key_.assign(key);
  add_to(data_, key, value, options_.restart_interval);
  if (data_.bytes.size() + 4 * data_.restarts.size() + 4 >= options_.block_size)
    flush_data();
  return {};
}

std::string table_builder::finish() {
  flush_data();
  if (pending_) {
    // After the last block: the shortest key >= its keys (LevelDB's FindShortSuccessor).
    std::string successor = last_key_;
    for (size_t i = 0; i < successor.size(); ++i)
      if (uint8_t(successor[i]) != 0xff) {
        successor[i] = char(uint8_t(successor[i]) + 1);
        successor.resize(i + 1);
        break;
      }
    add_to(index_, successor, pending_handle_, 1);
    pending_ = false;
  }
  block meta;
  std::string meta_handle = write_block(meta);
  std::string index_handle = write_block(index_);
  std::string footer = meta_handle + index_handle;
  footer.resize(footer_bytes - 8, '\0');
  put_fixed32(footer, uint32_t(table_magic & 0xffffffffu));
  put_fixed32(footer, uint32_t(table_magic >> 32));
  out_.append(footer);
  return std::move(out_);
}

result<std::vector<std::pair<std::string, std::string>>> read_table(std::string_view bytes,
                                                                    const std::string& what) {
  if (bytes.size() < footer_bytes)
    return data_loss(what + ": " + std::to_string(bytes.size()) +
                     " bytes, too short for a table (its footer alone is 48 bytes)");
  size_t f = bytes.size() - footer_bytes;
  uint64_t magic = get_fixed32(bytes.data() + bytes.size() - 8) |
                   uint64_t(get_fixed32(bytes.data() + bytes.size() - 4)) << 32;
  if (magic != table_magic)
    return data_loss(at(what, bytes.size() - 8) +
                     ": not a LevelDB-format table (the footer's magic number is wrong)");
  std::string_view footer = bytes.substr(f, footer_bytes - 8);
  size_t pos = 0;
  RUNNEL_ASSIGN_OR_RETURN(auto meta, decode_handle(footer, pos, what, f));
  (void)meta; // TensorFlow's tables carry no meta blocks
  RUNNEL_ASSIGN_OR_RETURN(auto index_handle, decode_handle(footer, pos, what, f));
  RUNNEL_ASSIGN_OR_RETURN(auto index, read_block(bytes, index_handle, what));
  std::vector<std::pair<std::string, std::string>> handles, out;
  RUNNEL_RETURN_IF_ERROR(parse_block(index, index_handle.offset, what, handles));
  for (auto& [separator, value] : handles) {
    size_t p = 0;
    RUNNEL_ASSIGN_OR_RETURN(auto h, decode_handle(value, p, what, index_handle.offset));
    RUNNEL_ASSIGN_OR_RETURN(auto contents, read_block(bytes, h, what));
    size_t before = out.size();
    RUNNEL_RETURN_IF_ERROR(parse_block(contents, h.offset, what, out));
    if (out.size() > before && out.back().first > separator)
      return data_loss(at(what, h.offset) + ": the block's keys pass its index entry '" +
                       separator + "'");
  }
  return out;
}

} // namespace runnel::tf
