// `runnel records count|verify|index|cat|stats|convert` (docs/records.md).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "runnel/apps/cli/cli_common.hpp"
#include "runnel/apps/support/records_tools.hpp"
#include "runnel/storage/record_index.hpp"

namespace runnel::cli {

const char* records_usage =
    "usage: runnel records count FILE... [--json]\n"
    "       runnel records verify FILE... [--json]\n"
    "       runnel records cat FILE... [--limit N] [--raw]\n"
    "       runnel records index FILE...\n"
    "       runnel records stats FILE... [--json]\n"
    "       runnel records convert --idx IMAGES LABELS OUT | --csv FILE OUT [--shards N] [--gzip]\n"
    "TFRecord files (raw, GZIP or ZLIB, detected automatically). count prints `FILE: N records`\n"
    "per file and `total: N records` (a fresh FILE.index sidecar answers without reading the\n"
    "file; a stale one is reported and the file read); verify checks every length and data CRC\n"
    "and reports the first corruption of each file as FILE:OFFSET. A bad file is named and the\n"
    "others still counted; the exit status is 1 if any file is bad. --json: one object per file,\n"
    "then one for the total. The sidecars of files also named (`runnel records count d/*` in a\n"
    "folder of indexed shards) are skipped, not read as record files.\n";

namespace {

std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

/// Drops the index sidecars (FILE.index) of record files also named: a shell glob over a folder
/// of indexed shards (`d/*`) names both, and a sidecar is not a record file. Says so on stderr.
void drop_sidecars(std::vector<std::string>& files) {
  std::set<std::string, std::less<>> named(files.begin(), files.end());
  size_t before = files.size();
  std::erase_if(files, [&](const std::string& f) {
    return f.ends_with(".index") && named.count(std::string_view(f).substr(0, f.size() - 6));
  });
  if (size_t n = before - files.size())
    std::fprintf(stderr, "runnel: skipped %zu index sidecar%s (FILE.index beside FILE)\n", n,
                 n == 1 ? "" : "s");
}

/// Splits flags from files; false (with a usage error printed) on an unknown option. The index
/// sidecars of named files are left out (drop_sidecars).
bool split_args(const std::vector<std::string>& args, std::vector<std::string>& files, bool& json,
                const char* usage, int& rc) {
  for (auto& a : args) {
    if (a == "--json") {
      json = true;
    } else if (!a.empty() && a[0] == '-') {
      rc = usage_error("unknown option " + a, usage);
      return false;
    } else {
      files.push_back(a);
    }
  }
  drop_sidecars(files);
  return true;
}

} // namespace

int records(const std::string& command, const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(records_usage, stdout);
    return 0;
  }
  std::vector<std::string> files;
  bool json = false;
  int rc = 0;
  if (!split_args(args, files, json, records_usage, rc))
    return rc;
  if (files.empty())
    return usage_error("records " + command + " needs at least one FILE", records_usage);
  int64_t total = 0;
  int bad = 0;
  for (auto& file : files) {
    nlohmann::ordered_json line;
    line["file"] = file;
    if (command == "index") {
      auto idx = write_record_index(file);
      if (!idx) {
        ++bad;
        std::fprintf(stderr, "runnel: %s\n", idx.error().to_string().c_str());
      } else {
        std::printf("%s: %zu records -> %s\n", file.c_str(), idx->offsets.size(),
                    record_index_path(file).c_str());
      }
      continue;
    }
    // count: a fresh sidecar index answers; a stale or damaged one is said, then the file read.
    std::string index_note;
    result<int64_t> n = invalid_argument("");
    if (command == "count" && std::filesystem::exists(record_index_path(file))) {
      auto idx = read_record_index(file);
      if (idx) {
        n = int64_t(idx->offsets.size());
      } else {
        index_note = "index " + record_index_path(file) + " not used: " + idx.error().message() +
                     " (run `runnel records index " + file + "`)";
        n = count_records(file);
      }
    } else {
      n = count_records(file);
    }
    if (!n) {
      ++bad;
      if (json) {
        line["ok"] = false;
        line["error"] = n.error().to_string();
        std::printf("%s\n", dump(line).c_str());
      } else {
        std::fprintf(stderr, "runnel: %s\n", n.error().to_string().c_str());
      }
      continue;
    }
    total += *n;
    if (json) {
      line["ok"] = true;
      line["records"] = *n;
      if (!index_note.empty())
        line["index"] = index_note;
      std::printf("%s\n", dump(line).c_str());
      continue;
    }
    if (!index_note.empty())
      std::fprintf(stderr, "runnel: %s: %s\n", file.c_str(), index_note.c_str());
    if (command == "count")
      std::printf("%s: %lld records%s\n", file.c_str(), static_cast<long long>(*n),
                  index_note.empty() ? "" : " (stale index: read the file)");
    else
      std::printf("%s: ok (%lld records)\n", file.c_str(), static_cast<long long>(*n));
  }
  if (command == "index")
    return bad ? 1 : 0;
  if (json) {
    nlohmann::ordered_json t;
    t["total"] = total;
    t["files"] = files.size();
    t["bad_files"] = bad;
    std::printf("%s\n", dump(t).c_str());
  } else if (command == "count") {
    std::printf("total: %lld records%s\n", static_cast<long long>(total),
                bad ? (" (" + std::to_string(bad) + " file" + (bad == 1 ? "" : "s") +
                       " unreadable)").c_str()
                    : "");
  } else if (bad) {
    std::printf("%d of %zu files are corrupt or unreadable\n", bad, files.size());
  }
  return bad ? 1 : 0;
}

namespace {

const char* cat_usage =
    "usage: runnel records cat FILE... [--limit N] [--raw]\n"
    "Prints each record as one line of JSON (valid for any bytes):\n"
    "  a tf.train.Example as {\"feature\":{\"type\":\"bytes\"|\"float\"|\"int64\",\"values\":[...]},...}\n"
    "  a SequenceExample as {\"context\":{<features>},\"feature_lists\":{\"name\":[<feature>,...]}}\n"
    "  anything else (ExampleListWithContext, other protobufs), or every record with --raw, as\n"
    "  {\"raw_base64\":\"...\",\"payload\":\"not an Example or SequenceExample\"}\n"
    "Bytes values that are not printable ASCII are base64 with \"encoding\":\"base64\"; NaN and\n"
    "infinities are the strings \"NaN\", \"Infinity\", \"-Infinity\". --limit N: the first N\n"
    "records of each file.\n";

const char* convert_usage =
    "usage: runnel records convert --idx IMAGES LABELS OUT [--shards N] [--gzip]\n"
    "       runnel records convert --csv FILE OUT [--shards N] [--gzip]\n"
    "Writes OUT-00000-of-0000N ... (with .gz under --gzip), creating OUT's folder. idx: Examples\n"
    "{image_raw (bytes), label, height, width (int64)}; CSV (header row): one feature per column,\n"
    "int64 when every non-empty cell is an integer, float when numeric, else bytes; an empty cell\n"
    "of a numeric column is an empty value list.\n";

const char* stats_usage =
    "usage: runnel records stats FILE... [--json]\n"
    "Per feature over all Examples (and SequenceExamples' contexts): type, records that carry it,\n"
    "value-list length range and value range (for bytes features, the range of their sizes:\n"
    "what decode_raw of the bytes will hold).\n";

} // namespace

int records_cat(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(cat_usage, stdout);
    return 0;
  }
  std::vector<std::string> files;
  int64_t limit = -1;
  bool raw = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--raw") {
      raw = true;
    } else if (args[i] == "--json") {
      // JSON is the only output format; accepted for symmetry with the other commands.
    } else if (args[i] == "--limit") {
      if (i + 1 >= args.size())
        return usage_error("--limit needs a number", cat_usage);
      char* end = nullptr;
      limit = std::strtoll(args[++i].c_str(), &end, 10);
      if (*end || limit < 0)
        return usage_error("--limit needs a non-negative number, got '" + args[i] + "'", cat_usage);
    } else if (!args[i].empty() && args[i][0] == '-') {
      return usage_error("unknown option " + args[i], cat_usage);
    } else {
      files.push_back(args[i]);
    }
  }
  drop_sidecars(files);
  if (files.empty())
    return usage_error("records cat needs a FILE", cat_usage);
  int bad = 0;
  apps::work_progress progress("records cat", limit < 0 ? apps::total_file_bytes(files) : 0);
  for (auto& file : files) {
    auto r = record_reader::open(file);
    if (!r) {
      ++bad;
      std::fprintf(stderr, "runnel: %s\n", r.error().to_string().c_str());
      continue;
    }
    apps::file_progress counted(progress, file, r->compression() == record_compression::none);
    std::string_view rec;
    for (int64_t n = 0; limit < 0 || n < limit; ++n) {
      auto more = r->next_view(rec);
      if (!more) {
        ++bad;
        std::fflush(stdout);
        std::fprintf(stderr, "runnel: %s\n", more.error().to_string().c_str());
        break;
      }
      if (!*more)
        break;
      counted.add(rec.size());
      std::string line = apps::record_to_json(rec, raw);
      line += '\n';
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
  }
  return bad ? 1 : 0;
}

int records_convert(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(convert_usage, stdout);
    return 0;
  }
  std::vector<std::string> pos;
  int shards = 1;
  bool gzip = false;
  std::string mode;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--idx" || args[i] == "--csv")
      mode = args[i];
    else if (args[i] == "--gzip")
      gzip = true;
    else if (args[i] == "--shards" && i + 1 < args.size())
      shards = std::atoi(args[++i].c_str());
    else if (!args[i].empty() && args[i][0] == '-')
      return usage_error("unknown option " + args[i], convert_usage);
    else
      pos.push_back(args[i]);
  }
  if (shards < 1)
    return usage_error("--shards must be a positive integer", convert_usage);
  auto c = gzip ? record_compression::gzip : record_compression::none;
  result<std::vector<std::string>> files = invalid_argument("");
  if (mode == "--idx" && pos.size() == 3)
    files = apps::convert_idx(pos[0], pos[1], pos[2], shards, c);
  else if (mode == "--csv" && pos.size() == 2)
    files = apps::convert_csv(pos[0], pos[1], shards, c);
  else
    return usage_error("records convert needs --idx IMAGES LABELS OUT or --csv FILE OUT",
                       convert_usage);
  if (!files)
    return fail(files.error());
  for (auto& f : *files)
    std::printf("wrote %s\n", f.c_str());
  return 0;
}

int records_stats(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(stats_usage, stdout);
    return 0;
  }
  std::vector<std::string> files;
  bool json = false;
  int rc = 0;
  if (!split_args(args, files, json, stats_usage, rc))
    return rc;
  if (files.empty())
    return usage_error("records stats needs at least one FILE", stats_usage);
  auto s = apps::record_stats(files);
  if (!s)
    return fail(s.error());
  std::string out = json ? apps::record_stats_json(*s) + "\n" : apps::format_record_stats(*s);
  std::fputs(out.c_str(), stdout);
  return 0;
}

} // namespace runnel::cli
