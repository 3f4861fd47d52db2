#include "runnel/storage/tf/tf_checkpoint.hpp"

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "runnel/ops/core/atomic_file.hpp"
#include "runnel/storage/crc32c.hpp"
#include "runnel/storage/tf/sstable.hpp"
#include "runnel/storage/tf/tensor_slice.hpp"
#include "runnel/storage/tf/tf_types.hpp"

namespace runnel {

namespace {

namespace fs = std::filesystem;

constexpr char index_suffix[] = ".index";

std::string shard_name(const std::string& prefix, int shard, int shards) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ".data-%05d-of-%05d", shard, shards);
  return prefix + buf;
}

/// One slice of a partitioned variable: where it sits in the whole, and its own entry.
struct slice_entry {
  std::vector<tf::slice_extent> extents;
  tensorflow::BundleEntryProto entry;
};

/// The parsed `.index`: its shard count, every tensor's entry by name, and the slices of
/// partitioned variables by the variable's name.
struct bundle {
  std::string prefix;
  int shards = 1;
  std::map<std::string, tensorflow::BundleEntryProto> entries;
  std::map<std::string, std::vector<slice_entry>> slices;
};

/// A dimension of a slice in one form whatever the writer chose for a whole dimension.
std::vector<tf::slice_extent> normalized(std::vector<tf::slice_extent> extents) {
  for (auto& e : extents)
    if (e.length < 0)
      e = {0, -1};
  return extents;
}

/// The bundle of an `.index` file's bytes; `index` names the file.
result<bundle> parse_bundle(std::string_view bytes, const std::string& index) {
  bundle b;
  RUNNEL_ASSIGN_OR_RETURN(auto rows, tf::read_table(bytes, index));
  if (rows.empty() || !rows.front().first.empty())
    return data_loss(index + ": no header entry (the empty key) comes first");
  tensorflow::BundleHeaderProto header;
  if (!header.ParseFromString(rows.front().second))
    return data_loss(index + ": the header entry does not parse as a BundleHeaderProto");
  if (header.endianness() != tensorflow::BundleHeaderProto::LITTLE)
    return unimplemented(index + ": a big-endian checkpoint (only little-endian ones are read)");
  if (header.version().min_consumer() > 1)
    return unimplemented(index + ": written for readers of bundle version " +
                         std::to_string(header.version().min_consumer()) +
                         " or later; this one reads version 1");
  if (header.num_shards() < 1)
    return data_loss(index + ": the header names " + std::to_string(header.num_shards()) +
                     " data shards");
  b.shards = header.num_shards();
  for (size_t i = 1; i < rows.size(); ++i) {
    auto& [key, value] = rows[i];
    bool slice = !key.empty() && key[0] == '\0'; // a slice, under its encoded name
    std::string name = key, what = key;
    std::vector<tf::slice_extent> extents;
    if (slice) {
      auto decoded = tf::decode_slice_key(key);
      if (!decoded)
        return decoded.error().with_context(index + ": entry " + std::to_string(i));
      what = decoded->first + " (slice " + tf::slice_to_string(decoded->second) + ")";
      name = decoded->first;
      extents = normalized(std::move(decoded->second));
    }
    tensorflow::BundleEntryProto e;
    if (!e.ParseFromString(value))
      return data_loss(index + ": the entry of '" + what + "' does not parse");
    if (e.slices_size() == 0 && (e.shard_id() < 0 || e.shard_id() >= b.shards))
      return data_loss(index + ": tensor '" + what + "' is in shard " +
                       std::to_string(e.shard_id()) + " of " + std::to_string(b.shards));
    if (slice)
      b.slices[name].push_back({std::move(extents), std::move(e)});
    else
      b.entries.emplace(name, std::move(e));
  }
  return b;
}

result<bundle> open_bundle(const std::string& path) {
  std::string prefix = tf_checkpoint_prefix(path);
  std::string index = prefix + index_suffix;
  std::ifstream in(index, std::ios::binary);
  if (!in)
    return not_found("no TensorFlow checkpoint index " + index);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  RUNNEL_ASSIGN_OR_RETURN(auto b, parse_bundle(bytes, index));
  b.prefix = prefix;
  return b;
}

/// What list_tf_checkpoint reports of a bundle.
std::vector<checkpoint_entry> entries_of(const bundle& b) {
  std::vector<checkpoint_entry> out;
  for (auto& [name, e] : b.entries) {
    checkpoint_entry c{name, dtype::f32, shape{}, ""};
    auto type = tf::from_proto(e.dtype());
    auto dims = tf::from_proto(e.shape());
    if (dims)
      c.dims = *dims;
    if (type)
      c.type = *type;
    else
      c.unsupported = type.error().message();
    out.push_back(std::move(c));
  }
  return out;
}

/// A data shard, opened once per read: the stream and its size.
struct shard_file {
  std::ifstream in;
  uint64_t size = 0;
};
using shard_files = std::map<int, std::unique_ptr<shard_file>>;

/// Reads the data of `e` from its shard (kept open in `files`).
result<std::string> read_data(const bundle& b, const std::string& name,
                              const tensorflow::BundleEntryProto& e, shard_files& files) {
  std::string file = shard_name(b.prefix, e.shard_id(), b.shards);
  auto& shard = files[e.shard_id()];
  if (!shard) {
    shard = std::make_unique<shard_file>();
    shard->in.open(file, std::ios::binary | std::ios::ate);
    if (!shard->in) {
      shard.reset();
      return not_found("tensor '" + name + "': its data shard " + file + " is missing");
    }
    shard->size = uint64_t(shard->in.tellg());
  }
  auto* in = &shard->in;
  auto size = shard->size;
  if (e.offset() < 0 || e.size() < 0 || uint64_t(e.offset()) > size ||
      uint64_t(e.size()) > size - uint64_t(e.offset()))
    return data_loss(file + ": tensor '" + name + "' at byte offset " + std::to_string(e.offset()) +
                     " (" + std::to_string(e.size()) + " bytes) runs past the shard's end (" +
                     std::to_string(size) + " bytes): the file is truncated");
  std::string data(size_t(e.size()), '\0');
  in->clear();
  in->seekg(e.offset());
  in->read(data.data(), std::streamsize(data.size()));
  if (!*in)
    return data_loss(file + ": reading tensor '" + name + "' at byte offset " +
                     std::to_string(e.offset()) + " failed");
  return data;
}

std::string crc_error(const std::string& file, const std::string& name, int64_t offset,
                      uint32_t stored, uint32_t actual) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " (stored %08" PRIx32 ", computed %08" PRIx32 ")", stored, actual);
  return file + ": tensor '" + name + "' at byte offset " + std::to_string(offset) +
         ": checksum mismatch" + buf;
}

/// A string tensor's bytes: varint64 lengths, the masked CRC32C of the lengths (as 32-bit words
/// when they fit, else 64-bit), then the strings; the entry's CRC covers all of it.
result<tensor> decode_strings(const std::string& data, shape dims, const std::string& file,
                              const std::string& name, const tensorflow::BundleEntryProto& e) {
  tensor t(dtype::string, dims);
  auto n = size_t(dims.num_elements());
  std::vector<uint64_t> lengths(n);
  size_t pos = 0;
  uint32_t crc = 0;
  auto corrupt = [&](const std::string& why) {
    return data_loss(file + ": string tensor '" + name + "' at byte offset " +
                     std::to_string(e.offset()) + ": " + why);
  };
  for (auto& len : lengths) {
    if (!tf::read_varint64(data, pos, len) || len > data.size())
      return corrupt("a corrupt length");
    if (len <= UINT32_MAX) {
      uint32_t l32 = uint32_t(len);
      crc = crc32c(&l32, 4, crc);
    } else {
      crc = crc32c(&len, 8, crc);
    }
  }
  if (data.size() - pos < 4)
    return corrupt("cut short before the lengths' checksum");
  uint32_t stored_lengths;
  std::memcpy(&stored_lengths, data.data() + pos, 4);
  if (unmask_crc(stored_lengths) != crc)
    return corrupt("the lengths' checksum does not match");
  crc = crc32c(data.data() + pos, 4, crc);
  pos += 4;
  auto* out = t.data<std::string>();
  for (size_t i = 0; i < n; ++i) {
    if (lengths[i] > data.size() - pos)
      return corrupt("string " + std::to_string(i) + " runs past the entry's end");
    out[i].assign(data.data() + pos, lengths[i]);
    crc = crc32c(data.data() + pos, lengths[i], crc);
    pos += lengths[i];
  }
  if (crc != unmask_crc(e.crc32c()))
    return data_loss(crc_error(file, name, e.offset(), unmask_crc(e.crc32c()), crc));
  return t;
}

result<tensor> read_tensor(const bundle& b, const std::string& name,
                           const tensorflow::BundleEntryProto& e, shard_files& files);

/// A partitioned variable: each slice its entry lists, read from the slice's own entry; the
/// slices must not overlap and must cover the whole, which is made only then (its size is what
/// the slices' bytes hold, not what a damaged entry may declare).
result<tensor> read_sliced(const bundle& b, const std::string& name, dtype type, const shape& dims,
                           const tensorflow::BundleEntryProto& e, shard_files& files) {
  std::string index = b.prefix + index_suffix;
  auto found = b.slices.find(name);
  struct part_value {
    std::vector<tf::slice_extent> extents;
    tensor value;
  };
  std::vector<part_value> parts;
  int64_t covered = 0;
  for (auto& proto : e.slices()) {
    std::vector<tf::slice_extent> extents;
    for (auto& x : proto.extent())
      extents.push_back({x.start(), x.has_length_case() == x.kLength ? x.length() : -1});
    extents = normalized(std::move(extents));
    std::string what = "tensor '" + name + "' slice " + tf::slice_to_string(extents);
    const slice_entry* part_entry = nullptr;
    if (found != b.slices.end())
      for (auto& s : found->second)
        if (s.extents == extents)
          part_entry = &s;
    if (!part_entry)
      return data_loss(index + ": " + what + " has no entry in the table");
    auto part_shape = tf::slice_shape(dims, extents);
    if (!part_shape)
      return part_shape.error().with_context(index + ": tensor '" + name + "'");
    for (auto& p : parts)
      if (tf::slices_overlap(dims, p.extents, extents))
        return data_loss(index + ": " + what + " overlaps its slice " +
                         tf::slice_to_string(p.extents));
    RUNNEL_ASSIGN_OR_RETURN(auto part,
                            read_tensor(b, name + " (slice " + tf::slice_to_string(extents) + ")",
                                        part_entry->entry, files));
    if (part.type() != type || part.shape() != *part_shape)
      return data_loss(index + ": " + what + " holds " + std::string(runnel::name(part.type())) +
                       part.shape().to_string() + ", not " + std::string(runnel::name(type)) +
                       part_shape->to_string());
    covered += part.num_elements();
    parts.push_back({std::move(extents), std::move(part)});
  }
  if (covered != dims.num_elements())
    return data_loss(index + ": tensor '" + name + "': its " + std::to_string(e.slices_size()) +
                     " slices hold " + std::to_string(covered) + " of its " +
                     std::to_string(dims.num_elements()) + " values");
  tensor whole(type, dims);
  for (auto& p : parts)
    tf::copy_slice_into(whole, p.value, p.extents);
  return whole;
}

result<tensor> read_tensor(const bundle& b, const std::string& name,
                           const tensorflow::BundleEntryProto& e, shard_files& files) {
  std::string index = b.prefix + index_suffix;
  auto type = tf::from_proto(e.dtype());
  if (!type)
    return type.error().with_context(index + ": tensor '" + name + "'");
  auto dims = tf::from_proto(e.shape());
  if (!dims || !dims->is_fully_defined())
    return data_loss(index + ": tensor '" + name + "' has no complete shape");
  auto count = dims->checked_num_elements();
  if (!count)
    return data_loss(index + ": tensor '" + name + "': " + count.error().message());
  if (e.slices_size() > 0)
    return read_sliced(b, name, *type, *dims, e, files);
  RUNNEL_ASSIGN_OR_RETURN(auto data, read_data(b, name, e, files));
  std::string file = shard_name(b.prefix, e.shard_id(), b.shards);
  // The shape must fit the bytes read before a tensor is made of it (a string takes at least
  // its length's byte).
  bool strings = *type == dtype::string;
  uint64_t need = uint64_t(*count) * (strings ? 1 : size_of(*type));
  if (strings ? need > data.size() : need != data.size())
    return data_loss(file + ": tensor '" + name + "' at byte offset " + std::to_string(e.offset()) +
                     " holds " + std::to_string(data.size()) + " bytes; its " +
                     std::string(runnel::name(*type)) + " shape " + dims->to_string() + " needs " +
                     (strings ? "at least " : "") + std::to_string(need));
  if (strings)
    return decode_strings(data, *dims, file, name, e);
  tensor t(*type, *dims);
  uint32_t actual = crc32c(data.data(), data.size());
  if (actual != unmask_crc(e.crc32c()))
    return data_loss(crc_error(file, name, e.offset(), unmask_crc(e.crc32c()), actual));
  std::memcpy(t.raw_data(), data.data(), data.size());
  return t;
}

/// The bytes TensorFlow stores for `t`, and their CRC32C (unmasked).
std::pair<std::string, uint32_t> encode_tensor(const tensor& t) {
  std::string out;
  if (t.type() != dtype::string) {
    out.assign(static_cast<const char*>(t.raw_data()), t.bytes());
    return {out, crc32c(out.data(), out.size())};
  }
  auto* s = t.data<std::string>();
  auto n = size_t(t.num_elements());
  uint32_t crc = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t len = s[i].size();
    tf::append_varint64(out, len);
    if (len <= UINT32_MAX) {
      uint32_t l32 = uint32_t(len);
      crc = crc32c(&l32, 4, crc);
    } else {
      crc = crc32c(&len, 8, crc);
    }
  }
  uint32_t masked = mask_crc(crc);
  out.append(reinterpret_cast<const char*>(&masked), 4);
  crc = crc32c(&masked, 4, crc);
  for (size_t i = 0; i < n; ++i) {
    out.append(s[i]);
    crc = crc32c(s[i].data(), s[i].size(), crc);
  }
  return {out, crc};
}

} // namespace

std::string tf_checkpoint_prefix(const std::string& path) {
  std::string suffix = index_suffix;
  if (path.size() > suffix.size() &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
    return path.substr(0, path.size() - suffix.size());
  return path;
}

bool is_tf_checkpoint(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(tf_checkpoint_prefix(path) + index_suffix, ec);
}

result<std::vector<checkpoint_entry>> list_tf_checkpoint(const std::string& path) {
  RUNNEL_ASSIGN_OR_RETURN(auto b, open_bundle(path));
  return entries_of(b);
}

result<std::vector<checkpoint_entry>> parse_tf_checkpoint_index(std::string_view bytes,
                                                                const std::string& what) {
  RUNNEL_ASSIGN_OR_RETURN(auto b, parse_bundle(bytes, what));
  return entries_of(b);
}

result<std::map<std::string, tensor>> read_tf_checkpoint(const std::string& path,
                                                         const std::vector<std::string>& names) {
  RUNNEL_ASSIGN_OR_RETURN(auto b, open_bundle(path));
  shard_files files;
  std::map<std::string, tensor> out;
  std::vector<std::string> wanted = names;
  if (wanted.empty())
    for (auto& [name, e] : b.entries)
      wanted.push_back(name);
  for (auto& name : wanted) {
    auto it = b.entries.find(name);
    if (it == b.entries.end()) {
      std::string some;
      int shown = 0;
      for (auto& [n, e] : b.entries)
        if (shown++ < 8)
          some += (some.empty() ? "" : ", ") + n;
      return not_found("tensor '" + name + "' is not in TensorFlow checkpoint " + b.prefix +
                       " (it has " + std::to_string(b.entries.size()) + ": " + some +
                       (b.entries.size() > 8 ? ", ..." : "") + ")");
    }
    RUNNEL_ASSIGN_OR_RETURN(auto t, read_tensor(b, name, it->second, files));
    out.emplace(name, std::move(t));
  }
  return out;
}

result<std::vector<checkpoint_entry>> list_any_checkpoint(const std::string& path) {
  return is_tf_checkpoint(path) ? list_tf_checkpoint(path) : list_checkpoint(path);
}

result<std::map<std::string, tensor>> read_any_checkpoint(const std::string& path,
                                                          const std::vector<std::string>& names) {
  if (is_tf_checkpoint(path))
    return read_tf_checkpoint(path, names);
  if (!names.empty())
    return read_checkpoint_tensors(path, names);
  RUNNEL_ASSIGN_OR_RETURN(auto c, read_checkpoint(path));
  return std::move(c.tensors);
}

status verify_any_checkpoint(const std::string& path) {
  return is_tf_checkpoint(path) ? read_tf_checkpoint(path, {}).error()
                                : verify_checkpoint_isolated(path);
}

status write_tf_checkpoint(const std::string& prefix,
                           const std::map<std::string, tensor>& tensors) {
  std::error_code ec;
  auto dir = fs::path(prefix).parent_path();
  if (!dir.empty())
    fs::create_directories(dir, ec);
  std::string data;
  tf::table_builder table;
  tensorflow::BundleHeaderProto header;
  header.set_num_shards(1);
  header.set_endianness(tensorflow::BundleHeaderProto::LITTLE);
  header.mutable_version()->set_producer(1);
  RUNNEL_RETURN_IF_ERROR(table.add("", header.SerializeAsString()));
  for (auto& [name, t] : tensors) {
    if (name.empty())
      return invalid_argument("write_tf_checkpoint: a tensor with an empty name (the key of the "
                              "checkpoint's header)");
    tensorflow::BundleEntryProto e;
    e.set_dtype(tf::to_proto(t.type()));
    tf::to_proto(t.shape(), e.mutable_shape());
    e.set_shard_id(0);
    e.set_offset(int64_t(data.size()));
    auto [bytes, crc] = encode_tensor(t);
    e.set_size(int64_t(bytes.size()));
    e.set_crc32c(mask_crc(crc));
    data.append(bytes);
    RUNNEL_RETURN_IF_ERROR(table.add(name, e.SerializeAsString()));
  }
  RUNNEL_RETURN_IF_ERROR(write_file_atomically(shard_name(prefix, 0, 1), data));
  return write_file_atomically(prefix + index_suffix, table.finish());
}

} // namespace runnel
