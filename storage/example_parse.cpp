#include "runnel/storage/example_parse.hpp"

#include <cstring>

#include "runnel/storage/example.hpp"

namespace runnel {
namespace {

/// Protobuf field of a Feature's list: 1 bytes_list, 2 float_list, 3 int64_list; 0 none.
int list_field(dtype t) {
  return t == dtype::string ? 1 : t == dtype::f32 ? 2 : 3;
}
const char* list_kind_name(int field) {
  return field == 1 ? "bytes" : field == 2 ? "float" : field == 3 ? "int64" : "empty";
}

/// A bare cursor: errors are reported through `bad` with the offset of the failure.
struct cursor {
  const uint8_t* p;
  const uint8_t* end;
  const uint8_t* origin;
  bool bad = false;
  size_t failed_at = 0;

  bool done() const { return p >= end; }
  void fail() {
    if (!bad)
      failed_at = size_t(p - origin);
    bad = true;
    p = end;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    fail();
    return 0;
  }
  std::string_view bytes() {
    uint64_t n = varint();
    if (bad || n > uint64_t(end - p)) {
      fail();
      return {};
    }
    std::string_view s(reinterpret_cast<const char*>(p), size_t(n));
    p += n;
    return s;
  }
  void skip(uint32_t wt) {
    switch (wt) {
    case 0: varint(); break;
    case 1: if (end - p < 8) fail(); else p += 8; break;
    case 2: bytes(); break;
    case 5: if (end - p < 4) fail(); else p += 4; break;
    default: fail();
    }
  }
  cursor sub(std::string_view s) const {
    auto* b = reinterpret_cast<const uint8_t*>(s.data());
    return {b, b + s.size(), origin};
  }
};

/// Names a record in errors, built only when an error happens.
struct record_label {
  std::string_view name; ///< used when index < 0
  int64_t index = -1;
  std::string str() const {
    return index < 0 ? std::string(name) : "record " + std::to_string(index) + " of the batch";
  }
};

struct found_feature {
  int field = -1; ///< -1: absent; 0: present but empty (no list set)
  std::string_view list;
};

/// Asks the CPU to start loading a record's first 4 KiB while the one before it is parsed:
/// records of a shuffled batch lie far apart in memory, and parsing one waits on its cache
/// misses one after the other.
inline void prefetch_record(std::string_view record) {
  size_t n = std::min<size_t>(record.size(), 4096);
  for (size_t off = 0; off < n; off += 64)
    __builtin_prefetch(record.data() + off);
}

/// Finds the features named by `specs` in one record.
status scan(std::string_view record, std::span<const feature_spec> specs,
            std::vector<found_feature>& found, const record_label& record_name) {
  found.assign(specs.size(), {});
  auto* b = reinterpret_cast<const uint8_t*>(record.data());
  cursor top{b, b + record.size(), b};
  while (!top.done()) {
    uint64_t tag = top.varint();
    if ((tag >> 3) != 1 || (tag & 7) != 2) {
      top.skip(uint32_t(tag & 7));
      continue;
    }
    cursor feats = top.sub(top.bytes());
    while (!feats.done()) {
      uint64_t ftag = feats.varint();
      if ((ftag >> 3) != 1 || (ftag & 7) != 2) {
        feats.skip(uint32_t(ftag & 7));
        continue;
      }
      cursor entry = feats.sub(feats.bytes());
      std::string_view key, value;
      bool has_value = false;
      while (!entry.done()) {
        uint64_t etag = entry.varint();
        if ((etag & 7) == 2 && (etag >> 3) == 1)
          key = entry.bytes();
        else if ((etag & 7) == 2 && (etag >> 3) == 2) {
          value = entry.bytes();
          has_value = true;
        } else
          entry.skip(uint32_t(etag & 7));
      }
      if (entry.bad) {
        feats.failed_at = entry.failed_at;
        feats.bad = true;
        break;
      }
      for (size_t i = 0; i < specs.size(); ++i) {
        if (specs[i].key.size() != key.size() ||
            std::memcmp(specs[i].key.data(), key.data(), key.size()) != 0)
          continue;
        found[i] = {0, {}};
        if (!has_value)
          break;
        cursor f = entry.sub(value);
        while (!f.done()) {
          uint64_t t = f.varint();
          uint32_t field = uint32_t(t >> 3);
          if ((t & 7) == 2 && field >= 1 && field <= 3)
            found[i] = {int(field), f.bytes()};
          else
            f.skip(uint32_t(t & 7));
        }
        if (f.bad) {
          feats.failed_at = f.failed_at;
          feats.bad = true;
        }
        break;
      }
    }
    if (feats.bad) {
      top.failed_at = feats.failed_at;
      top.bad = true;
      break;
    }
  }
  if (top.bad)
    return data_loss(record_name.str() + ": malformed Example at byte " +
                     std::to_string(top.failed_at));
  return {};
}

/// Appends the values of a list to `out`; false on malformed bytes.
bool decode_floats(std::string_view list, std::vector<float>& out) {
  auto* b = reinterpret_cast<const uint8_t*>(list.data());
  cursor c{b, b + list.size(), b};
  while (!c.done()) {
    uint64_t t = c.varint();
    if ((t >> 3) != 1) {
      c.skip(uint32_t(t & 7));
      continue;
    }
    if ((t & 7) == 2) {
      auto s = c.bytes();
      if (s.size() % 4)
        return false;
      size_t n = out.size();
      out.resize(n + s.size() / 4);
      if (!s.empty()) // an empty packed list: memcpy from a null pointer is undefined
        std::memcpy(out.data() + n, s.data(), s.size());
    } else if ((t & 7) == 5) {
      if (c.end - c.p < 4)
        return false;
      float v;
      std::memcpy(&v, c.p, 4);
      c.p += 4;
      out.push_back(v);
    } else {
      return false;
    }
  }
  return !c.bad;
}
bool decode_int64s(std::string_view list, std::vector<int64_t>& out) {
  auto* b = reinterpret_cast<const uint8_t*>(list.data());
  cursor c{b, b + list.size(), b};
  while (!c.done()) {
    uint64_t t = c.varint();
    if ((t >> 3) != 1) {
      c.skip(uint32_t(t & 7));
      continue;
    }
    if ((t & 7) == 2) {
      cursor p = c.sub(c.bytes());
      while (!p.done())
        out.push_back(int64_t(p.varint()));
      if (p.bad)
        return false;
    } else if ((t & 7) == 0) {
      out.push_back(int64_t(c.varint()));
    } else {
      return false;
    }
  }
  return !c.bad;
}
bool decode_bytes(std::string_view list, std::vector<std::string_view>& out) {
  auto* b = reinterpret_cast<const uint8_t*>(list.data());
  cursor c{b, b + list.size(), b};
  while (!c.done()) {
    uint64_t t = c.varint();
    if ((t >> 3) == 1 && (t & 7) == 2)
      out.push_back(c.bytes());
    else
      c.skip(uint32_t(t & 7));
  }
  return !c.bad;
}

/// The common case of a fixed float or int64 feature, decoded straight into the batch tensor
/// at element `at`: a list of exactly one packed field holding the `want` values the spec asks
/// for. False for anything else (unpacked or split lists, a wrong count, malformed bytes), which
/// the general path then decodes and reports; what this wrote before giving up is overwritten.
/// (The general path's scratch vector cost a zero-fill and a second copy of every image.)
bool decode_fixed_direct(const feature_spec& spec, const found_feature& ff, const tensor& dst,
                         int64_t at, size_t want) {
  if (ff.field != list_field(spec.type) || spec.type == dtype::string)
    return false;
  auto* b = reinterpret_cast<const uint8_t*>(ff.list.data());
  cursor c{b, b + ff.list.size(), b};
  if (c.done() || c.varint() != ((1u << 3) | 2))
    return false;
  auto packed = c.bytes();
  if (c.bad || !c.done())
    return false;
  if (spec.type == dtype::f32) {
    if (packed.size() != want * 4)
      return false;
    if (want > 0)
      std::memcpy(dst.data<float>() + at, packed.data(), want * 4);
    return true;
  }
  int64_t* out = dst.data<int64_t>() + at;
  cursor p = c.sub(packed);
  size_t n = 0;
  for (; !p.done() && n < want; ++n)
    out[n] = int64_t(p.varint());
  return !p.bad && p.done() && n == want;
}

/// The decoded values of one feature of one record, in scratch space reused across records.
struct values {
  std::vector<float> f;
  std::vector<int64_t> i;
  std::vector<std::string_view> s;
  size_t size(dtype t) const {
    return t == dtype::f32 ? f.size() : t == dtype::i64 ? i.size() : s.size();
  }
  /// Copies values [0, n) to `dst` (elements of type t) at element offset `at`.
  void copy_to(const tensor& dst, dtype t, int64_t at, size_t n) const {
    if (n == 0)
      return; // (memcpy from an empty vector's null data() is undefined)
    if (t == dtype::f32)
      std::memcpy(dst.data<float>() + at, f.data(), n * 4);
    else if (t == dtype::i64)
      std::memcpy(dst.data<int64_t>() + at, i.data(), n * 8);
    else
      for (size_t k = 0; k < n; ++k)
        dst.data<std::string>()[at + int64_t(k)].assign(s[k]);
  }
};

status decode(const feature_spec& spec, const found_feature& ff, values& v,
              const record_label& record_name) {
  v.f.clear();
  v.i.clear();
  v.s.clear();
  if (ff.field <= 0)
    return {};
  int want = list_field(spec.type);
  if (ff.field != want)
    return invalid_argument(record_name.str() + ": feature '" + spec.key + "' holds " +
                            list_kind_name(ff.field) + " values, but the spec asks for " +
                            std::string(name(spec.type)));
  bool ok = spec.type == dtype::f32   ? decode_floats(ff.list, v.f)
            : spec.type == dtype::i64 ? decode_int64s(ff.list, v.i)
                                      : decode_bytes(ff.list, v.s);
  if (!ok)
    return data_loss(record_name.str() + ": malformed value list of feature '" + spec.key +
                     "'");
  return {};
}

/// Fills `dst` at element offset `at` with the fixed feature's values or its default.
status fill_fixed(const feature_spec& spec, const found_feature& ff, const values& v,
                  const tensor& dst, int64_t at, const record_label& record_name) {
  size_t want = size_t(spec.shape.num_elements());
  if (ff.field < 0 || (ff.field == 0 && want > 0)) {
    if (!spec.default_value)
      return invalid_argument(record_name.str() + ": required feature '" + spec.key +
                              "' is missing (and has no default)");
    const tensor& d = *spec.default_value;
    if (spec.type == dtype::string)
      for (size_t k = 0; k < want; ++k)
        dst.data<std::string>()[at + int64_t(k)] = d.data<std::string>()[d.num_elements() == 1 ? 0 : k];
    else if (d.num_elements() == 1 && want != 1)
      for (size_t k = 0; k < want; ++k)
        std::memcpy(static_cast<char*>(dst.raw_data()) + (size_t(at) + k) * size_of(spec.type),
                    d.raw_data(), size_of(spec.type));
    else
      std::memcpy(static_cast<char*>(dst.raw_data()) + size_t(at) * size_of(spec.type),
                  d.raw_data(), want * size_of(spec.type));
    return {};
  }
  size_t got = v.size(spec.type);
  if (got != want)
    return invalid_argument(record_name.str() + ": feature '" + spec.key + "' has " +
                            std::to_string(got) + " values, expected " + std::to_string(want) +
                            " (shape " + spec.shape.to_string() + ")");
  v.copy_to(dst, spec.type, at, got);
  return {};
}

shape prepend(int64_t d, const shape& s) {
  std::vector<int64_t> dims{d};
  dims.insert(dims.end(), s.dims().begin(), s.dims().end());
  return shape(std::move(dims));
}

template <class Record>
status parse_batch_impl(const std::vector<feature_spec>& specs, std::span<const Record> records,
                        std::vector<tensor>& out) {
  int64_t batch = int64_t(records.size());
  out.clear();
  // Fixed features go straight into their output; the others are gathered first.
  std::vector<tensor> fixed(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].layout == feature_layout::fixed)
      fixed[i] = tensor(specs[i].type, prepend(batch, specs[i].shape));
  struct gathered {
    std::vector<values> rows;
  };
  std::vector<gathered> var(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].layout != feature_layout::fixed)
      var[i].rows.resize(size_t(batch));
  thread_local std::vector<found_feature> found;
  thread_local values scratch;
  for (int64_t r = 0; r < batch; ++r) {
    std::string_view rec(records[size_t(r)]);
    if (r + 1 < batch)
      prefetch_record(std::string_view(records[size_t(r + 1)]));
    record_label label{{}, r};
    RUNNEL_RETURN_IF_ERROR(scan(rec, specs, found, label));
    for (size_t i = 0; i < specs.size(); ++i) {
      auto& spec = specs[i];
      if (spec.layout == feature_layout::fixed &&
          decode_fixed_direct(spec, found[i], fixed[i], r * spec.shape.num_elements(),
                              size_t(spec.shape.num_elements())))
        continue;
      values& v = spec.layout == feature_layout::fixed ? scratch : var[i].rows[size_t(r)];
      RUNNEL_RETURN_IF_ERROR(decode(spec, found[i], v, label));
      if (spec.layout == feature_layout::fixed)
        RUNNEL_RETURN_IF_ERROR(fill_fixed(spec, found[i], v, fixed[i],
                                          r * spec.shape.num_elements(), label));
      // (string values of padded and sparse features point into the record, which outlives
      // this call)
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    auto& spec = specs[i];
    if (spec.layout == feature_layout::fixed) {
      out.push_back(std::move(fixed[i]));
      continue;
    }
    auto& rows = var[i].rows;
    int64_t max_len = 0, total = 0;
    for (auto& v : rows) {
      max_len = std::max<int64_t>(max_len, int64_t(v.size(spec.type)));
      total += int64_t(v.size(spec.type));
    }
    if (spec.layout == feature_layout::padded) {
      tensor values_t(spec.type, shape{batch, max_len});
      tensor lengths(dtype::i64, shape{batch});
      if (spec.type != dtype::string)
        std::memset(values_t.raw_data(), 0, values_t.bytes());
      for (int64_t r = 0; r < batch; ++r) {
        size_t n = rows[size_t(r)].size(spec.type);
        rows[size_t(r)].copy_to(values_t, spec.type, r * max_len, n);
        lengths.data<int64_t>()[r] = int64_t(n);
      }
      out.push_back(std::move(values_t));
      out.push_back(std::move(lengths));
    } else {
      tensor indices(dtype::i64, shape{total, 2});
      tensor values_t(spec.type, shape{total});
      int64_t k = 0;
      for (int64_t r = 0; r < batch; ++r) {
        size_t n = rows[size_t(r)].size(spec.type);
        rows[size_t(r)].copy_to(values_t, spec.type, k, n);
        for (size_t j = 0; j < n; ++j, ++k) {
          indices.data<int64_t>()[2 * k] = r;
          indices.data<int64_t>()[2 * k + 1] = int64_t(j);
        }
      }
      out.push_back(std::move(indices));
      out.push_back(std::move(values_t));
      out.push_back(tensor::vector<int64_t>({batch, max_len}));
    }
  }
  return {};
}

} // namespace

result<example_parser> example_parser::create(std::vector<feature_spec> specs) {
  for (size_t i = 0; i < specs.size(); ++i) {
    auto& s = specs[i];
    if (s.type != dtype::f32 && s.type != dtype::i64 && s.type != dtype::string)
      return invalid_argument("feature '" + s.key + "': type " + std::string(name(s.type)) +
                              " is not one an Example holds (float32, int64, string)");
    for (size_t j = 0; j < i; ++j)
      if (specs[j].key == s.key)
        return invalid_argument("feature '" + s.key + "' is listed twice");
    if (s.layout != feature_layout::fixed)
      continue;
    if (!s.shape.is_fully_defined())
      return invalid_argument("fixed feature '" + s.key + "' needs a fully defined shape, got " +
                              s.shape.to_string() + " (use a padded or sparse layout)");
    if (s.default_value) {
      auto& d = *s.default_value;
      if (d.type() != s.type)
        return invalid_argument("default of feature '" + s.key + "' is " +
                                std::string(name(d.type())) + ", expected " +
                                std::string(name(s.type)));
      if (d.num_elements() != 1 && d.num_elements() != s.shape.num_elements())
        return invalid_argument("default of feature '" + s.key + "' has " +
                                std::to_string(d.num_elements()) + " values; shape " +
                                s.shape.to_string() + " needs " +
                                std::to_string(s.shape.num_elements()) + " (or 1)");
    }
  }
  example_parser p;
  p.specs_ = std::move(specs);
  return p;
}

std::vector<dtype> example_parser::output_types() const {
  std::vector<dtype> out;
  for (auto& s : specs_) {
    if (s.layout == feature_layout::fixed)
      out.push_back(s.type);
    else if (s.layout == feature_layout::padded)
      out.insert(out.end(), {s.type, dtype::i64});
    else
      out.insert(out.end(), {dtype::i64, s.type, dtype::i64});
  }
  return out;
}

std::vector<shape> example_parser::output_shapes(bool batch, int64_t b) const {
  std::vector<shape> out;
  for (auto& s : specs_) {
    if (s.layout == feature_layout::fixed)
      out.push_back(batch ? prepend(b, s.shape) : s.shape);
    else if (s.layout == feature_layout::padded)
      out.insert(out.end(), {batch ? shape{b, -1} : shape{-1}, batch ? shape{b} : shape{}});
    else
      out.insert(out.end(), {shape{-1, batch ? 2 : 1}, shape{-1}, shape{batch ? 2 : 1}});
  }
  return out;
}

status example_parser::parse_single(std::string_view record, std::vector<tensor>& out,
                                    std::string_view record_name) const {
  thread_local std::vector<found_feature> found;
  thread_local values v;
  out.clear();
  record_label label{record_name};
  RUNNEL_RETURN_IF_ERROR(scan(record, specs_, found, label));
  for (size_t i = 0; i < specs_.size(); ++i) {
    auto& spec = specs_[i];
    if (spec.layout == feature_layout::fixed) {
      tensor t(spec.type, spec.shape);
      if (!decode_fixed_direct(spec, found[i], t, 0, size_t(spec.shape.num_elements()))) {
        RUNNEL_RETURN_IF_ERROR(decode(spec, found[i], v, label));
        RUNNEL_RETURN_IF_ERROR(fill_fixed(spec, found[i], v, t, 0, label));
      }
      out.push_back(std::move(t));
      continue;
    }
    RUNNEL_RETURN_IF_ERROR(decode(spec, found[i], v, label));
    int64_t n = int64_t(v.size(spec.type));
    tensor values_t(spec.type, shape{n});
    v.copy_to(values_t, spec.type, 0, size_t(n));
    if (spec.layout == feature_layout::padded) {
      out.push_back(std::move(values_t));
      out.push_back(tensor::scalar<int64_t>(n));
    } else {
      tensor idx(dtype::i64, shape{n, 1});
      for (int64_t j = 0; j < n; ++j)
        idx.data<int64_t>()[j] = j;
      out.push_back(std::move(idx));
      out.push_back(std::move(values_t));
      out.push_back(tensor::vector<int64_t>({n}));
    }
  }
  return {};
}

status example_parser::parse_batch(std::span<const std::string> records,
                                   std::vector<tensor>& out) const {
  return parse_batch_impl<std::string>(specs_, records, out);
}
status example_parser::parse_batch(std::span<const std::string_view> records,
                                   std::vector<tensor>& out) const {
  return parse_batch_impl<std::string_view>(specs_, records, out);
}

status parse_single_sequence_example(std::string_view record,
                                     std::span<const feature_spec> context,
                                     std::span<const feature_spec> sequence,
                                     std::vector<tensor>& out, std::string_view record_name) {
  out.clear();
  auto decoded = decode_sequence_example(record);
  if (!decoded)
    return decoded.error().with_context(std::string(record_name));
  auto want_kind = [](dtype t) {
    return t == dtype::f32 ? feature_kind::floats
           : t == dtype::i64 ? feature_kind::int64s
                             : feature_kind::bytes;
  };
  // Writes feature `f` (checked against `spec`) into `dst` at element `at`.
  auto put = [&](const feature_spec& spec, const feature& f, const tensor& dst, int64_t at,
                 const std::string& where) -> status {
    if (f.size() > 0 && f.kind != want_kind(spec.type))
      return invalid_argument(std::string(record_name) + ": " + where + " '" + spec.key +
                              "' holds " + to_string(f.kind) + " values, but the spec asks for " +
                              std::string(name(spec.type)));
    int64_t want = spec.shape.num_elements();
    if (int64_t(f.size()) != want)
      return invalid_argument(std::string(record_name) + ": " + where + " '" + spec.key +
                              "' has " + std::to_string(f.size()) + " values, expected " +
                              std::to_string(want) + " (shape " + spec.shape.to_string() + ")");
    if (spec.type == dtype::f32)
      std::memcpy(dst.data<float>() + at, f.floats.data(), size_t(want) * 4);
    else if (spec.type == dtype::i64)
      std::memcpy(dst.data<int64_t>() + at, f.int64s.data(), size_t(want) * 8);
    else
      for (int64_t k = 0; k < want; ++k)
        dst.data<std::string>()[at + k] = f.bytes[size_t(k)];
    return {};
  };
  for (auto& spec : context) {
    tensor t(spec.type, spec.shape);
    auto it = decoded->context.find(spec.key);
    if (it == decoded->context.end()) {
      if (!spec.default_value)
        return invalid_argument(std::string(record_name) + ": required context feature '" +
                                spec.key + "' is missing (and has no default)");
      out.push_back(spec.default_value->copy());
      continue;
    }
    RUNNEL_RETURN_IF_ERROR(put(spec, it->second, t, 0, "context feature"));
    out.push_back(std::move(t));
  }
  for (auto& spec : sequence) {
    auto it = decoded->feature_lists.find(spec.key);
    int64_t steps = it == decoded->feature_lists.end() ? 0 : int64_t(it->second.size());
    tensor t(spec.type, prepend(steps, spec.shape));
    for (int64_t s = 0; s < steps; ++s)
      RUNNEL_RETURN_IF_ERROR(put(spec, it->second[size_t(s)], t, s * spec.shape.num_elements(),
                                 "step " + std::to_string(s) + " of feature list"));
    out.push_back(std::move(t));
    out.push_back(tensor::scalar<int64_t>(steps));
  }
  return {};
}

} // namespace runnel
