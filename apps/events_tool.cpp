// `runnel events cat`: TensorBoard event files (written by Runnel or TensorFlow) as text or JSON.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>

#include "apps/cli_common.hpp"
#include "storage/tf/events.hpp"

namespace runnel::cli {

const char* events_usage =
    "usage: runnel events cat FILE|LOGDIR... [--json] [--tag TAG]\n"
    "Prints the events of TensorBoard event files (a LOGDIR: every events.out.tfevents.* file in\n"
    "it, by name). Text: one line per value (`step 1954  loss = 1.6406`), the file version and\n"
    "graphs, then a summary of the tags. With --json: one object per scalar value,\n"
    "  {\"step\": 1954, \"wall_time\": 1700000000.5, \"tag\": \"loss\", \"value\": 1.6406}\n"
    "--tag keeps the values of one tag.\n";

namespace {

const char* kind_name(summary_entry::kind k) {
  switch (k) {
    case summary_entry::kind::scalar:
      return "scalar";
    case summary_entry::kind::histogram:
      return "histogram";
    case summary_entry::kind::image:
      return "image";
    case summary_entry::kind::text:
      return "text";
    case summary_entry::kind::tensor:
      return "tensor";
    case summary_entry::kind::audio:
      return "audio";
    case summary_entry::kind::other:
      break;
  }
  return "other";
}

result<std::vector<std::string>> expand(const std::string& arg) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(arg, ec))
    return std::vector<std::string>{arg};
  std::vector<std::string> files;
  for (auto& e : fs::directory_iterator(arg, ec))
    if (e.path().filename().string().starts_with("events.out.tfevents."))
      files.push_back(e.path().string());
  if (ec)
    return unavailable("cannot list " + arg + ": " + ec.message());
  if (files.empty())
    return not_found(arg + " holds no events.out.tfevents.* files");
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace

int events_cat(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(events_usage, stdout);
    return 0;
  }
  std::vector<std::string> inputs;
  bool json = false;
  std::string only;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json")
      json = true;
    else if (args[i] == "--tag" && i + 1 < args.size())
      only = args[++i];
    else if (!args[i].empty() && args[i][0] != '-')
      inputs.push_back(args[i]);
    else
      return usage_error("events cat: unexpected argument '" + args[i] + "'", events_usage);
  }
  if (inputs.empty())
    return usage_error("events cat needs a FILE or LOGDIR", events_usage);
  int bad = 0;
  // Output goes through one buffer per file: event files can hold millions of values.
  std::string buf;
  auto drain = [&buf](bool force) {
    if (force || buf.size() > (1 << 16)) {
      std::fwrite(buf.data(), 1, buf.size(), stdout);
      buf.clear();
    }
  };
  for (auto& input : inputs) {
    auto files = expand(input);
    if (!files) {
      ++bad;
      std::fprintf(stderr, "runnel: %s\n", files.error().to_string().c_str());
      continue;
    }
    for (auto& file : *files) {
      auto r = event_reader::open(file);
      if (!r) {
        ++bad;
        std::fprintf(stderr, "runnel: %s\n", r.error().to_string().c_str());
        continue;
      }
      std::map<std::string, std::pair<std::string, int64_t>> tags; // tag -> kind, count
      int64_t events = 0, graphs = 0;
      if (!json)
        buf += file + "\n";
      event e;
      while (true) {
        auto more = r->next(e);
        if (!more) {
          drain(true);
          ++bad;
          std::fprintf(stderr, "runnel: %s\n", more.error().to_string().c_str());
          break;
        }
        if (!*more)
          break;
        ++events;
        if (!e.file_version.empty() && !json)
          buf += "  file_version " + e.file_version + "\n";
        if (e.graph_nodes) {
          ++graphs;
          if (!json)
            buf += "  step " + std::to_string(e.step) + "  graph (" +
                   std::to_string(*e.graph_nodes) + " nodes)\n";
        }
        if (!e.other.empty() && !json)
          buf += "  step " + std::to_string(e.step) + "  " + e.other + "\n";
        for (auto& v : e.values) {
          if (!only.empty() && v.tag != only)
            continue;
          auto& t = tags[v.tag];
          t.first = kind_name(v.what);
          ++t.second;
          if (json) {
            if (v.what != summary_entry::kind::scalar)
              continue;
            nlohmann::ordered_json j = {{"step", e.step}, {"wall_time", e.wall_time}, {"tag", v.tag},
                                {"value", v.value}};
            buf += j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
          } else if (v.what == summary_entry::kind::scalar) {
            char num[32];
            std::snprintf(num, sizeof num, "%.8g", v.value);
            buf += "  step " + std::to_string(e.step) + "  " + v.tag + " = " + num + "\n";
          } else {
            buf += "  step " + std::to_string(e.step) + "  " + v.tag + ": " + v.description + "\n";
          }
        }
        drain(false);
      }
      if (!json) {
        buf += "  " + std::to_string(events) + " events, graph: " + (graphs ? "yes" : "no") +
               ", tags:";
        for (auto& [tag, kc] : tags)
          buf += " " + tag + " (" + kc.first + ", " + std::to_string(kc.second) + ")";
        buf += "\n";
      }
      drain(true);
    }
  }
  return bad ? 1 : 0;
}

} // namespace runnel::cli
