// `runnel records convert` and `runnel records stats`.
#include "apps/records_tools.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "apps/app_support.hpp"
#include "storage/example.hpp"
#include "storage/record_file.hpp"
#include "storage/record_index.hpp"

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
      RUNNEL_ASSIGN_OR_RETURN(auto w, record_writer::open(name, compression_));
      writer_ = std::make_unique<record_writer>(std::move(w));
      files_.push_back(name);
      written_ = 0;
    }
    ++written_;
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
  // A column is numeric when every value parses as a number; integers stay int64.
  std::vector<feature_kind> kinds(header.size(), feature_kind::int64s);
  for (size_t col = 0; col < header.size(); ++col)
    for (auto& r : rows) {
      double v;
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
      if (ft.kind == feature_kind::bytes)
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

result<std::string> record_stats(const std::vector<std::string>& files) {
  struct stat {
    feature_kind kind;
    int64_t records = 0;
    size_t min_len = std::numeric_limits<size_t>::max(), max_len = 0;
    double lo = INFINITY, hi = -INFINITY;
  };
  std::map<std::string, stat> stats;
  int64_t total = 0, not_examples = 0;
  for (auto& file : files) {
    RUNNEL_ASSIGN_OR_RETURN(auto r, record_reader::open(file));
    std::string rec;
    for (;;) {
      RUNNEL_ASSIGN_OR_RETURN(bool more, r.next(rec));
      if (!more)
        break;
      ++total;
      auto f = decode_example(rec);
      if (!f || f->empty()) {
        ++not_examples;
        continue;
      }
      for (auto& [name, ft] : *f) {
        auto& s = stats.try_emplace(name, stat{ft.kind}).first->second;
        s.kind = ft.kind;
        ++s.records;
        s.min_len = std::min(s.min_len, ft.size());
        s.max_len = std::max(s.max_len, ft.size());
        for (float v : ft.floats) {
          s.lo = std::min(s.lo, double(v));
          s.hi = std::max(s.hi, double(v));
        }
        for (int64_t v : ft.int64s) {
          s.lo = std::min(s.lo, double(v));
          s.hi = std::max(s.hi, double(v));
        }
      }
    }
  }
  std::ostringstream os;
  os << "records: " << total;
  if (not_examples)
    os << " (" << not_examples << " not tf.train.Example)";
  os << "\n";
  for (auto& [name, s] : stats) {
    os << "  " << name << "  " << to_string(s.kind) << "  in " << s.records << " records  length "
       << s.min_len << ".." << s.max_len;
    if (s.kind != feature_kind::bytes && s.lo <= s.hi)
      os << "  values " << s.lo << ".." << s.hi;
    os << "\n";
  }
  return os.str();
}

} // namespace runnel::apps
