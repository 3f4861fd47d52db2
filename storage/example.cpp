#include "runnel/storage/example.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <sstream>

namespace runnel {

const char* to_string(feature_kind k) {
  switch (k) {
    case feature_kind::bytes:
      return "bytes";
    case feature_kind::floats:
      return "float";
    case feature_kind::int64s:
      return "int64";
  }
  return "?";
}

size_t feature::size() const {
  return kind == feature_kind::bytes    ? bytes.size()
         : kind == feature_kind::floats ? floats.size()
                                        : int64s.size();
}

namespace {

/// A cursor over protobuf wire-format bytes; offsets are relative to the whole record.
struct wire_reader {
  std::string_view data;
  size_t base; // offset of data[0] in the record
  size_t pos = 0;

  bool done() const { return pos >= data.size(); }
  status error(const std::string& what) const {
    return data_loss("malformed protobuf at byte " + std::to_string(base + pos) + ": " + what);
  }
  result<uint64_t> varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= data.size())
        return error("truncated varint");
      uint8_t b = uint8_t(data[pos++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    return error("varint longer than 10 bytes");
  }
  result<std::string_view> bytes() {
    RUNNEL_ASSIGN_OR_RETURN(uint64_t n, varint());
    if (n > data.size() - pos)
      return error("length " + std::to_string(n) + " runs past the end");
    auto s = data.substr(pos, size_t(n));
    pos += size_t(n);
    return s;
  }
  result<uint32_t> fixed32() {
    if (data.size() - pos < 4)
      return error("truncated fixed32");
    uint32_t v;
    std::memcpy(&v, data.data() + pos, 4);
    pos += 4;
    return v;
  }
  status skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0:
        return varint().error();
      case 1:
        if (data.size() - pos < 8)
          return error("truncated fixed64");
        pos += 8;
        return {};
      case 2:
        return bytes().error();
      case 5:
        return fixed32().error();
      default:
        return error("unsupported wire type " + std::to_string(wire_type));
    }
  }
  wire_reader sub(std::string_view s) const {
    return {s, base + size_t(s.data() - data.data()), 0};
  }
};

result<feature> decode_feature(wire_reader r) {
  feature f;
  bool seen = false;
  while (!r.done()) {
    RUNNEL_ASSIGN_OR_RETURN(uint64_t key, r.varint());
    uint32_t field = uint32_t(key >> 3), wt = uint32_t(key & 7);
    if (field < 1 || field > 3 || wt != 2) {
      RUNNEL_RETURN_IF_ERROR(r.skip(wt));
      continue;
    }
    RUNNEL_ASSIGN_OR_RETURN(auto list_bytes, r.bytes());
    f = feature{};
    f.kind = field == 1   ? feature_kind::bytes
             : field == 2 ? feature_kind::floats
                          : feature_kind::int64s;
    seen = true;
    wire_reader l = r.sub(list_bytes);
    while (!l.done()) {
      RUNNEL_ASSIGN_OR_RETURN(uint64_t k, l.varint());
      uint32_t lf = uint32_t(k >> 3), lw = uint32_t(k & 7);
      if (lf != 1) {
        RUNNEL_RETURN_IF_ERROR(l.skip(lw));
        continue;
      }
      if (f.kind == feature_kind::bytes) {
        if (lw != 2)
          return l.error("bytes_list value with wire type " + std::to_string(lw));
        RUNNEL_ASSIGN_OR_RETURN(auto s, l.bytes());
        f.bytes.emplace_back(s);
      } else if (f.kind == feature_kind::floats) {
        if (lw == 5) { // unpacked
          RUNNEL_ASSIGN_OR_RETURN(uint32_t bits, l.fixed32());
          float v;
          std::memcpy(&v, &bits, 4);
          f.floats.push_back(v);
        } else if (lw == 2) { // packed
          RUNNEL_ASSIGN_OR_RETURN(auto s, l.bytes());
          if (s.size() % 4)
            return l.error("packed float list of " + std::to_string(s.size()) + " bytes");
          size_t n = f.floats.size();
          f.floats.resize(n + s.size() / 4);
          if (!s.empty()) // an empty packed list: memcpy from a null pointer is undefined
            std::memcpy(f.floats.data() + n, s.data(), s.size());
        } else {
          return l.error("float_list value with wire type " + std::to_string(lw));
        }
      } else {
        if (lw == 0) {
          RUNNEL_ASSIGN_OR_RETURN(uint64_t v, l.varint());
          f.int64s.push_back(int64_t(v));
        } else if (lw == 2) {
          RUNNEL_ASSIGN_OR_RETURN(auto s, l.bytes());
          wire_reader p = l.sub(s);
          while (!p.done()) {
            RUNNEL_ASSIGN_OR_RETURN(uint64_t v, p.varint());
            f.int64s.push_back(int64_t(v));
          }
        } else {
          return l.error("int64_list value with wire type " + std::to_string(lw));
        }
      }
    }
  }
  if (!seen)
    f.kind = feature_kind::floats; // an empty Feature: no kind set; treat as empty floats
  return f;
}

/// Features{map<string, Feature> feature = 1}
result<feature_map> decode_features(wire_reader r) {
  feature_map out;
  while (!r.done()) {
    RUNNEL_ASSIGN_OR_RETURN(uint64_t key, r.varint());
    uint32_t field = uint32_t(key >> 3), wt = uint32_t(key & 7);
    if (field != 1 || wt != 2) {
      RUNNEL_RETURN_IF_ERROR(r.skip(wt));
      continue;
    }
    RUNNEL_ASSIGN_OR_RETURN(auto entry_bytes, r.bytes());
    wire_reader e = r.sub(entry_bytes);
    std::string name;
    feature value;
    while (!e.done()) {
      RUNNEL_ASSIGN_OR_RETURN(uint64_t k, e.varint());
      uint32_t ef = uint32_t(k >> 3), ew = uint32_t(k & 7);
      if (ef == 1 && ew == 2) {
        RUNNEL_ASSIGN_OR_RETURN(auto s, e.bytes());
        name = std::string(s);
      } else if (ef == 2 && ew == 2) {
        RUNNEL_ASSIGN_OR_RETURN(auto s, e.bytes());
        RUNNEL_ASSIGN_OR_RETURN(value, decode_feature(e.sub(s)));
      } else {
        RUNNEL_RETURN_IF_ERROR(e.skip(ew));
      }
    }
    out[name] = std::move(value);
  }
  return out;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(v | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}

void put_bytes(std::string& out, uint32_t field, std::string_view s) {
  put_varint(out, (uint64_t(field) << 3) | 2);
  put_varint(out, s.size());
  out.append(s);
}

std::string encode_feature(const feature& f) {
  std::string list;
  if (f.kind == feature_kind::bytes) {
    for (auto& b : f.bytes)
      put_bytes(list, 1, b);
  } else if (f.kind == feature_kind::floats) {
    if (!f.floats.empty())
      put_bytes(
          list, 1,
          std::string_view(reinterpret_cast<const char*>(f.floats.data()), f.floats.size() * 4));
  } else {
    std::string packed;
    for (auto v : f.int64s)
      put_varint(packed, uint64_t(v));
    if (!f.int64s.empty())
      put_bytes(list, 1, packed);
  }
  std::string out;
  put_bytes(out, f.kind == feature_kind::bytes ? 1 : f.kind == feature_kind::floats ? 2 : 3, list);
  return out;
}

std::string encode_features(const feature_map& m) {
  std::string out;
  for (auto& [name, f] : m) {
    std::string entry;
    put_bytes(entry, 1, name);
    put_bytes(entry, 2, encode_feature(f));
    put_bytes(out, 1, entry);
  }
  return out;
}

} // namespace

result<feature_map> decode_example(std::string_view bytes) {
  wire_reader r{bytes, 0};
  feature_map out;
  while (!r.done()) {
    RUNNEL_ASSIGN_OR_RETURN(uint64_t key, r.varint());
    uint32_t field = uint32_t(key >> 3), wt = uint32_t(key & 7);
    if (field == 1 && wt == 2) {
      RUNNEL_ASSIGN_OR_RETURN(auto s, r.bytes());
      RUNNEL_ASSIGN_OR_RETURN(auto f, decode_features(r.sub(s)));
      for (auto& [k, v] : f)
        out[k] = std::move(v);
    } else {
      RUNNEL_RETURN_IF_ERROR(r.skip(wt));
    }
  }
  return out;
}

std::string encode_example(const feature_map& features) {
  std::string out;
  put_bytes(out, 1, encode_features(features));
  return out;
}

result<sequence_example> decode_sequence_example(std::string_view bytes) {
  wire_reader r{bytes, 0};
  sequence_example out;
  while (!r.done()) {
    RUNNEL_ASSIGN_OR_RETURN(uint64_t key, r.varint());
    uint32_t field = uint32_t(key >> 3), wt = uint32_t(key & 7);
    if (field == 1 && wt == 2) {
      RUNNEL_ASSIGN_OR_RETURN(auto s, r.bytes());
      RUNNEL_ASSIGN_OR_RETURN(out.context, decode_features(r.sub(s)));
    } else if (field == 2 && wt == 2) { // FeatureLists{map<string, FeatureList> feature_list = 1}
      RUNNEL_ASSIGN_OR_RETURN(auto s, r.bytes());
      wire_reader lists = r.sub(s);
      while (!lists.done()) {
        RUNNEL_ASSIGN_OR_RETURN(uint64_t k, lists.varint());
        if ((k >> 3) != 1 || (k & 7) != 2) {
          RUNNEL_RETURN_IF_ERROR(lists.skip(uint32_t(k & 7)));
          continue;
        }
        RUNNEL_ASSIGN_OR_RETURN(auto entry_bytes, lists.bytes());
        wire_reader e = lists.sub(entry_bytes);
        std::string name;
        std::vector<feature> steps;
        while (!e.done()) {
          RUNNEL_ASSIGN_OR_RETURN(uint64_t ek, e.varint());
          uint32_t ef = uint32_t(ek >> 3), ew = uint32_t(ek & 7);
          if (ef == 1 && ew == 2) {
            RUNNEL_ASSIGN_OR_RETURN(auto n, e.bytes());
            name = std::string(n);
          } else if (ef == 2 && ew == 2) { // FeatureList{repeated Feature feature = 1}
            RUNNEL_ASSIGN_OR_RETURN(auto fl, e.bytes());
            wire_reader items = e.sub(fl);
            while (!items.done()) {
              RUNNEL_ASSIGN_OR_RETURN(uint64_t ik, items.varint());
              if ((ik >> 3) != 1 || (ik & 7) != 2) {
                RUNNEL_RETURN_IF_ERROR(items.skip(uint32_t(ik & 7)));
                continue;
              }
              RUNNEL_ASSIGN_OR_RETURN(auto fb, items.bytes());
              RUNNEL_ASSIGN_OR_RETURN(auto f, decode_feature(items.sub(fb)));
              steps.push_back(std::move(f));
            }
          } else {
            RUNNEL_RETURN_IF_ERROR(e.skip(ew));
          }
        }
        out.feature_lists[name] = std::move(steps);
      }
    } else {
      RUNNEL_RETURN_IF_ERROR(r.skip(wt));
    }
  }
  return out;
}

std::string encode_sequence_example(const sequence_example& s) {
  std::string out;
  put_bytes(out, 1, encode_features(s.context));
  std::string lists;
  for (auto& [name, steps] : s.feature_lists) {
    std::string list;
    for (auto& f : steps)
      put_bytes(list, 1, encode_feature(f));
    std::string entry;
    put_bytes(entry, 1, name);
    put_bytes(entry, 2, list);
    put_bytes(lists, 1, entry);
  }
  put_bytes(out, 2, lists);
  return out;
}

std::string base64(std::string_view bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += {table[v >> 18], table[(v >> 12) & 63], table[(v >> 6) & 63], table[v & 63]};
  }
  if (i + 1 == bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    out += {table[v >> 18], table[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += {table[v >> 18], table[(v >> 12) & 63], table[(v >> 6) & 63], '='};
  }
  return out;
}

namespace {

bool printable(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c >= 0x7f)
      return false;
  return true;
}

nlohmann::ordered_json feature_json(const feature& f) {
  nlohmann::ordered_json j;
  j["type"] = to_string(f.kind);
  bool as_base64 = false;
  if (f.kind == feature_kind::bytes)
    for (auto& b : f.bytes)
      as_base64 = as_base64 || !printable(b);
  if (as_base64)
    j["encoding"] = "base64";
  auto values = nlohmann::ordered_json::array();
  for (size_t i = 0; i < f.size(); ++i) {
    if (f.kind == feature_kind::bytes) {
      values.push_back(as_base64 ? base64(f.bytes[i]) : f.bytes[i]);
    } else if (f.kind == feature_kind::floats) {
      float v = f.floats[i];
      if (std::isfinite(v)) // the shortest decimal that reads back as this float32
        values.push_back(std::stod(fmt::format("{}", v)));
      else // JSON has no NaN or infinity
        values.push_back(std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    } else {
      values.push_back(f.int64s[i]);
    }
  }
  j["values"] = std::move(values);
  return j;
}

nlohmann::ordered_json features_json(const feature_map& features) {
  auto j = nlohmann::ordered_json::object();
  for (auto& [name, f] : features)
    j[name] = feature_json(f);
  return j;
}

std::string dump(const nlohmann::ordered_json& j) {
  // Every control character escaped; bytes that are not UTF-8 (in a feature's name) replaced.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

} // namespace

std::string features_to_json(const feature_map& features) { return dump(features_json(features)); }

std::string sequence_example_to_json(const sequence_example& s) {
  nlohmann::ordered_json j;
  j["context"] = features_json(s.context);
  auto lists = nlohmann::ordered_json::object();
  for (auto& [name, steps] : s.feature_lists) {
    auto list = nlohmann::ordered_json::array();
    for (auto& f : steps)
      list.push_back(feature_json(f));
    lists[name] = std::move(list);
  }
  j["feature_lists"] = std::move(lists);
  return dump(j);
}

} // namespace runnel
