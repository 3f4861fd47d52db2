#pragma once
// What the `runnel` tool's subcommands share: errors on stderr with exit status 1 (bad input)
// or 2 (bad usage), and --help detection.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "runnel/ops/graph/graph.hpp"
#include "runnel/ops/optimize/graph_optimizer.hpp"
#include "runnel/ops/core/status.hpp"

namespace runnel::cli {

inline int fail(const status& s) {
  std::fprintf(stderr, "runnel: %s\n", s.to_string().c_str());
  return 1;
}

inline int usage_error(const std::string& message, const char* usage) {
  std::fprintf(stderr, "runnel: %s\n%s", message.c_str(), usage);
  return 2;
}

/// A graph file of any format the tool reads: a Runnel graph file or a TensorFlow GraphDef
/// (.pb binary or .pbtxt text), told apart by the file's first bytes (apps/cli/tf_tools.cpp).
result<graph> load_any_graph(const std::string& path);
/// The graph optimizer's rewrite of `g` computing `fetches` (tensor names; empty: every node no
/// other node reads), with every pass RUNNEL_GRAPH_OPTIMIZER leaves on (apps/cli/tf_tools.cpp).
result<optimized_graph> optimized_graph_of(const graph& g, const std::vector<std::string>& fetches);

inline bool wants_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& a) { return a == "--help" || a == "-h"; });
}

/// Parses `FILE [--out OUT]` (the form of `graph import` and `keras import`): false, with a usage
/// error printed and `rc` set, on anything else.
inline bool parse_file_and_out(const std::vector<std::string>& args, const std::string& command,
                               const char* usage, std::string& file, std::string& out, int& rc) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--out" && i + 1 < args.size()) {
      out = args[++i];
    } else if (!args[i].empty() && args[i][0] != '-' && file.empty()) {
      file = args[i];
    } else {
      rc = usage_error(command + ": unexpected argument '" + args[i] + "'", usage);
      return false;
    }
  }
  return true;
}

/// Subcommands in apps/cli/tf_tools.cpp.
int graph_import(const std::vector<std::string>& args);
int graph_export(const std::vector<std::string>& args);
int run_model(const std::vector<std::string>& args);
/// `runnel run DIR ...` on a SavedModel: feeds and fetches are the signature's keys.
struct saved_model_run {
  std::string dir, tags, signature; ///< tags "serve" when empty
  std::vector<std::pair<std::string, std::string>> feed_files, feed_texts;
  std::vector<std::string> fetches, outs;
};
/// `batch` and `usage` for the usage errors of options a SavedModel does not take.
int run_saved_model(const saved_model_run& r, int64_t batch, const char* usage);
/// `runnel graph import DIR`: a SavedModel's tag sets, variables, init op and signatures.
int saved_model_show(const std::string& dir, const std::string& tags);
extern const char* run_usage;
/// apps/cli/events_tool.cpp
int events_cat(const std::vector<std::string>& args);
extern const char* events_usage;
/// apps/cli/records_cli.cpp
int records(const std::string& command, const std::vector<std::string>& args);
int records_cat(const std::vector<std::string>& args);
int records_convert(const std::vector<std::string>& args);
int records_stats(const std::vector<std::string>& args);
extern const char* records_usage;
/// apps/cli/ckpt_tool.cpp: inspect, verify, convert
int ckpt(const std::string& command, const std::vector<std::string>& args);
extern const char* ckpt_usage;
/// apps/cli/ops_tool.cpp
int ops(const std::vector<std::string>& args);
extern const char* ops_usage;
/// apps/cli/keras_tool.cpp
int keras_import(const std::vector<std::string>& args);
extern const char* keras_usage;

} // namespace runnel::cli
