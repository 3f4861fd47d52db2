// `runnel records convert` and `runnel records stats`.
#include "runnel/apps/support/records_tools.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "runnel/apps/support/app_support.hpp"
#include "runnel/storage/example.hpp"
#include "runnel/storage/record_file.hpp"
#include "runnel/storage/record_index.hpp"

namespace runnel::apps {
namespace {

/// Writes records into `shards` files in contiguous runs of ceil(total / shards) each.
class sharded_writer {
public:
  sharded_writer(std::string base, int shards, int64_t total, record_compression c)
      : base_(std::move(base)), shards_(shards),
        per_(std::max<int64_t>(1, (total + shards - 1) / shards)), compression_(c) {}
  status write(const std::string& record) {
    if (!writer_ || written_ == per_) {
      if (writer_)
        RUNNEL_RETURN_IF_ERROR(writer_->close());
      auto name = shard_name(base_, shard_++, shards_) +
                  (compression_ == record_compression::gzip ? ".gz" : "");
      if (auto dir = std::filesystem::path(name).parent_path(); !dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(dir, ec); // the output's folder, made on demand
        if (ec)
          return unavailable("cannot create " + dir.string() + ": " + ec.message());
      }
      RUNNEL_ASSIGN_OR_RETURN(auto w, record_writer::open(name, compression_));
      writer_ = std::make_unique<record_writer>(std::move(w));
      files_.push_back(name);
      written_ = 0;
    }
    ++written_;
    progress_.add(record.size() + 16);
    return writer_->write(record);
  }
  result<std::vector<std::string>> finish() {
    if (writer_)
      RUNNEL_RETURN_IF_ERROR(writer_->close());
    return files_;
  }

private:
  std::string base_;
  int shards_, shard_ = 0;
  int64_t per_, written_ = 0;
  record_compression compression_;
  std::unique_ptr<record_writer> writer_;
  work_progress progress_{"records convert"};
  std::vector<std::string> files_;
};

result<std::vector<std::string>> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
        cell += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        cell += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cell);
      cell.clear();
    } else if (c != '\r') {
      cell += c;
    }
  }
  if (quoted)
    return invalid_argument("unterminated quoted field");
  out.push_back(cell);
  return out;
}

bool parse_number(const std::string& s, double& v) {
  if (s.empty())
    return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return *end == '\0';
}

} // namespace

result<std::vector<std::string>> convert_idx(const std::string& images, const std::string& labels,
                                             const std::string& out_base, int shards,
                                             record_compression c) {
  RUNNEL_ASSIGN_OR_RETURN(auto set, load_image_set(images, labels));
  RUNNEL_ASSIGN_OR_RETURN(auto raw, read_idx(images));
  int64_t n = set.size(), pixels = set.images.dim(1);
  sharded_writer out(out_base, shards, n, c);
  for (int64_t i = 0; i < n; ++i) {
    feature_map f;
    // Pixels as their original bytes (compact; DecodeRaw turns them into a tensor), the label
    // as an int64.
    f["image_raw"] = {
        feature_kind::bytes,
        {std::string(reinterpret_cast<const char*>(raw.bytes.data()) + i * pixels, size_t(pixels))},
        {},
        {}};
    f["label"] = {feature_kind::int64s, {}, {}, {set.labels.data<int32_t>()[i]}};
    f["height"] = {feature_kind::int64s, {}, {}, {raw.dims[1]}};
    f["width"] = {feature_kind::int64s, {}, {}, {raw.dims[2]}};
    RUNNEL_RETURN_IF_ERROR(out.write(encode_example(f)));
  }
  return out.finish();
}

result<std::vector<std::string>> convert_csv(const std::string& csv, const std::string& out_base,
                                             int shards, record_compression c) {
  std::ifstream in(csv);
  if (!in)
    return not_found("cannot open " + csv);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  std::vector<std::string> header;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty())
      continue;
    auto cells = split_csv_line(line);
    if (!cells)
      return cells.error().with_context(csv + ":" + std::to_string(number));
    if (header.empty()) {
      header = *cells;
      continue;
    }
    if (cells->size() != header.size())
      return invalid_argument(csv + ":" + std::to_string(number) + ": " +
                              std::to_string(cells->size()) + " fields, the header has " +
                              std::to_string(header.size()));
    rows.push_back(std::move(*cells));
  }
  if (header.empty())
    return invalid_argument(csv + " is empty");
  // A column is numeric when every value parses as a number; integers stay int64. Empty cells
  // (missing values) do not decide the type: they become empty value lists of it.
  std::vector<feature_kind> kinds(header.size(), feature_kind::int64s);
  for (size_t col = 0; col < header.size(); ++col)
    for (auto& r : rows) {
      double v;
      if (r[col].empty())
        continue;
      if (!parse_number(r[col], v)) {
        kinds[col] = feature_kind::bytes;
        break;
      }
      if (v != std::floor(v) || r[col].find_first_of(".eE") != std::string::npos)
        kinds[col] = feature_kind::floats;
    }
  sharded_writer out(out_base, shards, int64_t(rows.size()), c);
  for (auto& r : rows) {
    feature_map f;
    for (size_t col = 0; col < header.size(); ++col) {
      feature ft;
      ft.kind = kinds[col];
      double v = 0;
      if (r[col].empty() && ft.kind != feature_kind::bytes)
        ; // a missing number: no values
      else if (ft.kind == feature_kind::bytes)
        ft.bytes = {r[col]};
      else if (parse_number(r[col], v) && ft.kind == feature_kind::floats)
        ft.floats = {float(v)};
      else
        ft.int64s = {int64_t(v)};
      f[header[col]] = ft;
    }
    RUNNEL_RETURN_IF_ERROR(out.write(encode_example(f)));
  }
  return out.finish();
}

namespace {

/// Valid UTF-8 with no control characters: what a feature's name looks like.
bool is_text(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = uint8_t(s[i]);
    size_t extra;
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f)
        return false;
      extra = 0;
    } else if ((c >> 5) == 6) {
      extra = 1;
    } else if ((c >> 4) == 14) {
      extra = 2;
    } else if ((c >> 3) == 30) {
      extra = 3;
    } else {
      return false;
    }
    if (extra > s.size() - i - 1)
      return false;
    for (size_t k = 1; k <= extra; ++k)
      if ((uint8_t(s[i + k]) >> 6) != 2)
        return false;
    i += extra + 1;
  }
  return true;
}

bool names_are_text(const feature_map& f) {
  for (auto& [name, _] : f)
    if (name.empty() || !is_text(name))
      return false;
  return true;
}

/// The top-level field numbers of a protobuf message (false: not a well-formed message).
bool top_level_fields(std::string_view b, std::vector<uint32_t>& fields) {
  size_t i = 0;
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && i < b.size(); shift += 7) {
      auto c = uint8_t(b[i++]);
      v |= uint64_t(c & 0x7f) << shift;
      if (!(c & 0x80))
        return true;
    }
    return false;
  };
  while (i < b.size()) {
    uint64_t key, len;
    if (!varint(key) || (key & 7) != 2 || !varint(len) || len > b.size() - i)
      return false; // Example and SequenceExample hold only length-delimited fields
    fields.push_back(uint32_t(key >> 3));
    i += size_t(len);
  }
  return true;
}

} // namespace

decoded_record classify_record(std::string_view record) {
  decoded_record out;
  std::vector<uint32_t> fields;
  if (!top_level_fields(record, fields))
    return out;
  bool has_lists = false;
  for (auto f : fields) {
    if (f != 1 && f != 2)
      return out;
    has_lists = has_lists || f == 2;
  }
  if (has_lists) {
    auto s = decode_sequence_example(record);
    if (!s || !names_are_text(s->context))
      return out;
    for (auto& [name, _] : s->feature_lists)
      if (name.empty() || !is_text(name))
        return out;
    out.what = decoded_record::kind::sequence_example;
    out.sequence = std::move(s).value();
    return out;
  }
  auto e = decode_example(record);
  if (!e || !names_are_text(*e))
    return out;
  out.what = decoded_record::kind::example;
  out.example = std::move(e).value();
  return out;
}

std::string record_to_json(std::string_view record, bool raw) {
  auto d = raw ? decoded_record{} : classify_record(record);
  switch (d.what) {
    case decoded_record::kind::example:
      return features_to_json(d.example);
    case decoded_record::kind::sequence_example:
      return sequence_example_to_json(d.sequence);
    case decoded_record::kind::other:
      break;
  }
  return std::string("{\"raw_base64\":\"") + base64(record) + "\"" +
         (raw ? "" : ",\"payload\":\"not an Example or SequenceExample\"") + "}";
}

uint64_t total_file_bytes(const std::vector<std::string>& files) {
  uint64_t total = 0;
  for (auto& f : files) {
    std::error_code ec;
    auto n = std::filesystem::file_size(f, ec);
    total += ec ? 0 : n;
  }
  return total;
}

file_progress::file_progress(work_progress& p, const std::string& file, bool raw)
    : progress_(p), raw_(raw) {
  std::error_code ec;
  auto n = std::filesystem::file_size(file, ec);
  size_ = ec ? 0 : n;
}

file_progress::~file_progress() {
  progress_.add(size_ > counted_ ? size_ - counted_ : 0, 0); // what framing or inflating hid
}

result<records_summary> record_stats(const std::vector<std::string>& files) {
  records_summary out;
  auto add = [&out](const feature_map& features) {
    for (auto& [name, ft] : features) {
      auto [it, fresh] = out.features.try_emplace(name);
      auto& s = it->second;
      s.kind = ft.kind;
      if (fresh || s.records == 0) {
        s.min_len = ft.size();
        s.max_len = ft.size();
      }
      ++s.records;
      s.min_len = std::min(s.min_len, ft.size());
      s.max_len = std::max(s.max_len, ft.size());
      auto value = [&s](double v) {
        s.lo = s.has_values ? std::min(s.lo, v) : v;
        s.hi = s.has_values ? std::max(s.hi, v) : v;
        s.has_values = true;
      };
      for (float v : ft.floats)
        value(double(v));
      for (int64_t v : ft.int64s)
        value(double(v));
      for (auto& v : ft.bytes) // a bytes feature's range is its values' sizes
        value(double(v.size()));
    }
  };
  work_progress progress("records stats", total_file_bytes(files));
  for (auto& file : files) {
    RUNNEL_ASSIGN_OR_RETURN(auto r, record_reader::open(file));
    file_progress counted(progress, file, r.compression() == record_compression::none);
    std::string_view rec;
    for (;;) {
      RUNNEL_ASSIGN_OR_RETURN(bool more, r.next_view(rec));
      if (!more)
        break;
      counted.add(rec.size());
      ++out.records;
      auto d = classify_record(rec);
      if (d.what == decoded_record::kind::example) {
        add(d.example);
      } else if (d.what == decoded_record::kind::sequence_example) {
        ++out.sequence_examples;
        add(d.sequence.context);
      } else {
        ++out.other;
      }
    }
  }
  return out;
}

std::string format_record_stats(const records_summary& s) {
  std::ostringstream os;
  os << "records: " << s.records;
  if (s.sequence_examples)
    os << " (" << s.sequence_examples << " SequenceExamples: their contexts are counted)";
  if (s.other)
    os << " (" << s.other << " not tf.train.Example)";
  os << "\n";
  for (auto& [name, f] : s.features) {
    os << "  " << name << "  " << to_string(f.kind) << "  in " << f.records << " records  length "
       << f.min_len << ".." << f.max_len;
    if (f.kind != feature_kind::bytes && f.has_values)
      os << "  values " << f.lo << ".." << f.hi;
    else if (f.has_values)
      os << "  sizes " << f.lo << ".." << f.hi << " bytes";
    os << "\n";
  }
  return os.str();
}

std::string record_stats_json(const records_summary& s) {
  nlohmann::ordered_json j;
  j["records"] = s.records;
  j["sequence_examples"] = s.sequence_examples;
  j["not_examples"] = s.other;
  auto features = nlohmann::ordered_json::object();
  for (auto& [name, f] : s.features) {
    nlohmann::ordered_json e;
    e["type"] = to_string(f.kind);
    e["records"] = f.records;
    e["min_length"] = f.min_len;
    e["max_length"] = f.max_len;
    if (f.kind != feature_kind::bytes && f.has_values) {
      e["min"] = f.lo;
      e["max"] = f.hi;
    } else if (f.has_values) {
      e["min_bytes"] = int64_t(f.lo);
      e["max_bytes"] = int64_t(f.hi);
    }
    features[name] = std::move(e);
  }
  j["features"] = std::move(features);
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

} // namespace runnel::apps
