// The `runnel` command-line tool.
//
//   runnel ckpt inspect FILE [--values]   variables, dtypes, shapes, global step (+ summaries)
//   runnel graph dump FILE                a saved GraphDef as text
//
// Errors go to stderr, with exit status 1 (bad input) or 2 (bad usage).
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "runnel/apps/cli/cli_common.hpp"
#include "runnel/apps/support/records_tools.hpp"
#include "runnel/net/graph_def.hpp"
#include "runnel/ops/graph/frames.hpp"
#include "runnel/placement/cost_model.hpp"
#include "runnel/placement/dot.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/example.hpp"
#include "runnel/storage/record_file.hpp"
#include "runnel/storage/record_index.hpp"

using namespace runnel;
using runnel::cli::fail;
using runnel::cli::usage_error;
using runnel::cli::wants_help;

namespace {

const char* main_usage =
    "usage: runnel <command> [args]\n"
    "commands:\n"
    "  ckpt inspect FILE|PREFIX|DIR [--values] [--json]  a checkpoint's variables\n"
    "  ckpt verify DIR                check that DIR/checkpoint names whole, readable files\n"
    "  ckpt convert FROM TO           between HDF5 and TensorFlow's V2 checkpoints, bit for bit\n"
    "  graph dump FILE                print a saved graph, one node per line\n"
    "  graph dot FILE [--place P]     the graph for Graphviz, nodes colored by device\n"
    "  graph import MODEL.pb|.meta    check a TensorFlow GraphDef (.pb/.pbtxt) or MetaGraphDef\n"
    "  graph export GRAPH OUT.pb      write a graph as a TensorFlow GraphDef (.pb/.pbtxt)\n"
    "  run MODEL --feed X=IN.npy --fetch Y [--out OUT.npy]   run a graph on NumPy arrays\n"
    "  run SAVED_MODEL_DIR [--signature KEY] --feed K=IN.npy  run a SavedModel's signature\n"
    "  events cat FILE|LOGDIR [--json]   TensorBoard event files: scalars, tags, graphs\n"
    "  keras import MODEL.h5 --out OUT.pb  a Keras model as a graph (inputs/outputs by layer)\n"
    "  records count FILE...          count the records of TFRecord files\n"
    "  records verify FILE...         check every record's CRCs; non-zero exit on corruption\n"
    "  records cat FILE [--limit N] [--raw]   records as JSON lines (decoded Examples)\n"
    "  records index FILE...          write FILE.index sidecars (counts and random access)\n"
    "  records stats FILE...          per feature: type, length range, value (bytes: size) range\n"
    "  records convert --idx IMAGES LABELS OUT [--shards N] [--gzip]\n"
    "  records convert --csv FILE OUT [--shards N] [--gzip]\n"
    "                                 write sharded record files of Examples\n"
    "  ops [NAME...]                  the ops Runnel has: kernels per device, gradients\n"
    "  ops --tensorflow [--missing]   which TensorFlow 1.x ops an imported graph may hold\n"
    "`runnel <command> --help` prints a command's options, `runnel --help` every command's;\n"
    "`runnel --version` prints the version. An option's value may follow it or an `=`\n"
    "(--limit 5, --limit=5). --verbose anywhere prints informational lines on stderr (the\n"
    "GPUs found, ...); so does RUNNEL_VERBOSE=1.\n";

const char* graph_usage =
    "usage: runnel graph dump FILE [--json] [--optimized [--fetch NAME]...]\n"
    "       runnel graph import MODEL.pb|MODEL.pbtxt [--out FILE.graph]\n"
    "       runnel graph export GRAPH OUT.pb|OUT.pbtxt\n"
    "       runnel graph dot FILE [--place first|cost] [--devices N] [--explain]\n"
    "FILE and GRAPH are any graph file: a Runnel graph file (save_graph) or a TensorFlow\n"
    "GraphDef (.pb binary or .pbtxt text, as keras import and graph export write).\n"
    "dump prints a graph, one node per line:\n"
    "  name = Op(inputs, ^control_inputs) {attrs} -> output dtypes and shapes @device\n"
    "then a line per while-loop frame (# frame NAME: N nodes, in PARENT, ...).\n"
    "--optimized: the graph as a session runs it, after the graph optimizer's passes\n"
    "(RUNNEL_GRAPH_OPTIMIZER switches them; docs/graph_optimizer.md), computing the --fetch\n"
    "tensors (default: every node nothing reads); what each pass did goes to stderr.\n"
    "dot prints it for Graphviz (dot -Tsvg), nodes colored by device: the devices the nodes\n"
    "request, or with --place the devices a placer picks over N virtual CPUs (default 2);\n"
    "--explain prints the cost-model placer's reasons on stderr.\n";

/// One line per while-loop frame after the nodes: its name, enclosing frame, node count,
/// parallel_iterations and condition.
void print_frames(const graph& g) {
  std::vector<int> all(size_t(g.num_nodes()));
  std::iota(all.begin(), all.end(), 0);
  auto frames = find_loop_frames(g, all).frames; // node index = node id here
  for (size_t f = 1; f < frames.size(); ++f) {
    auto& fr = frames[f];
    std::printf("# frame %s: %zu nodes, in %s, parallel_iterations %lld, condition %s\n",
                fr.name.c_str(), fr.members.size(),
                fr.parent == 0 ? "the top level" : frames[size_t(fr.parent)].name.c_str(),
                static_cast<long long>(fr.parallel_iterations),
                fr.loop_cond < 0 ? "(none)" : g.at(fr.loop_cond).name.c_str());
  }
}

int graph_dump(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(graph_usage, stdout);
    return 0;
  }
  std::vector<std::string> files, fetch_names;
  bool json = false, optimized = false;
  for (size_t i = 0; i < args.size(); ++i) {
    auto& a = args[i];
    if (a == "--json")
      json = true;
    else if (a == "--optimized")
      optimized = true;
    else if (a == "--fetch" && i + 1 < args.size())
      fetch_names.push_back(args[++i]);
    else if (!a.empty() && a[0] == '-')
      return usage_error("unknown option " + a, graph_usage);
    else
      files.push_back(a);
  }
  if (files.size() != 1)
    return usage_error("graph dump needs exactly one FILE", graph_usage);
  auto g = cli::load_any_graph(files[0]);
  if (!g)
    return fail(g.error());
  if (optimized) {
    auto og = cli::optimized_graph_of(*g, fetch_names);
    if (!og)
      return fail(og.error());
    for (auto& line : og->changes)
      std::fprintf(stderr, "%s\n", line.c_str());
    *g = std::move(*og->g);
  }
  if (!json) {
    std::fputs(g->to_text().c_str(), stdout);
    print_frames(*g);
    return 0;
  }
  // One object per node: name, op, inputs, device, attributes (rendered) and outputs.
  for (auto& n : g->nodes()) {
    auto d = n.to_def(*g);
    nlohmann::ordered_json j;
    j["name"] = n.name;
    j["op"] = n.op;
    j["inputs"] = d.inputs;
    if (!n.device.empty())
      j["device"] = n.device;
    auto attrs = nlohmann::ordered_json::object();
    for (auto& [k, v] : n.attrs)
      attrs[k] = attr_to_string(v);
    j["attrs"] = std::move(attrs);
    auto outs = nlohmann::ordered_json::array();
    for (int i = 0; i < n.num_outputs(); ++i)
      outs.push_back({{"dtype", std::string(name(n.output_types[size_t(i)]))},
                      {"shape", n.output_shapes[size_t(i)].has_known_rank()
                                    ? nlohmann::ordered_json(n.output_shapes[size_t(i)].dims())
                                    : nlohmann::ordered_json()}});
    j["outputs"] = std::move(outs);
    std::printf("%s\n",
                j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  }
  return 0;
}

int graph_dot(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(graph_usage, stdout);
    return 0;
  }
  std::string file, policy;
  int64_t devices = 2;
  bool explain = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--place" && i + 1 < args.size()) {
      policy = args[++i];
    } else if (args[i] == "--devices" && i + 1 < args.size()) {
      devices = std::atoll(args[++i].c_str());
    } else if (args[i] == "--explain") {
      explain = true;
    } else if (file.empty() && !args[i].empty() && args[i][0] != '-') {
      file = args[i];
    } else {
      return usage_error("graph dot: unexpected argument '" + args[i] + "'", graph_usage);
    }
  }
  if (file.empty())
    return usage_error("graph dot needs a FILE", graph_usage);
  if (!policy.empty() && policy != "first" && policy != "cost")
    return usage_error("--place must be first or cost, got '" + policy + "'", graph_usage);
  if (devices < 1 || devices > 64)
    return usage_error("--devices must be between 1 and 64", graph_usage);
  auto g = cli::load_any_graph(file);
  if (!g)
    return fail(g.error());
  if (policy.empty()) {
    std::fputs(to_dot(*g).c_str(), stdout);
    return 0;
  }
  auto devs = local_cpu_devices(int(devices));
  auto nodes = all_nodes(*g);
  auto any = any_kernel;
  std::vector<size_t> where;
  if (policy == "cost") {
    cost_model costs;
    auto p = place_greedy(*g, nodes, devs, std::vector<device_params>(devs.size()), costs, any,
                          {.allow_soft_placement = true});
    if (!p)
      return fail(p.error());
    if (explain)
      std::fputs(p->explain(*g, nodes, devs).c_str(), stderr);
    where = p->device;
  } else {
    auto p = place_simple(*g, nodes, devs, any, {.allow_soft_placement = true});
    if (!p)
      return fail(p.error());
    where = *p;
  }
  std::vector<std::string> names;
  for (auto d : where)
    names.push_back(devs[d].name);
  std::fputs(to_dot(*g, &names).c_str(), stdout);
  return 0;
}

} // namespace

/// The options that take a value (every command's): `--name=value` is `--name value` for these.
const std::set<std::string, std::less<>> value_options = {
    "--batch", "--csv", "--devices", "--feed",   "--feed-text", "--fetch", "--idx",
    "--limit", "--out", "--place",   "--shards", "--signature", "--tag",   "--tags"};

int main(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) { // --verbose anywhere: informational lines on stderr
    std::string a = argv[i];
    if (auto eq = a.find('='); a.starts_with("--") && eq != std::string::npos) {
      std::string name = a.substr(0, eq);
      if (!value_options.count(name))
        return usage_error("'" + a + "': " + name + " is not an option that takes a value",
                           main_usage);
      args.push_back(name);
      args.push_back(a.substr(eq + 1));
    } else if (a == "--verbose") {
      runnel::set_verbose_logging(true);
    } else {
      args.push_back(a);
    }
  }
  if (args.empty()) {
    std::fputs(main_usage, stderr);
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    // The whole reference: the command list, then every command's own usage.
    std::fputs(main_usage, stdout);
    for (const char* usage :
         {runnel::cli::ckpt_usage, graph_usage, runnel::cli::run_usage, runnel::cli::events_usage,
          runnel::cli::keras_usage, runnel::cli::records_usage, runnel::cli::ops_usage})
      std::printf("\n%s", usage);
    return 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::printf("runnel %s\n", RUNNEL_VERSION);
    return 0;
  }
  if (args.size() >= 2 && args[0] == "ckpt" &&
      (args[1] == "verify" || args[1] == "inspect" || args[1] == "convert"))
    return runnel::cli::ckpt(args[1], {args.begin() + 2, args.end()});
  if (args.size() >= 2 && args[0] == "graph" && args[1] == "dump")
    return graph_dump({args.begin() + 2, args.end()});
  if (args.size() >= 2 && args[0] == "graph" && args[1] == "import")
    return runnel::cli::graph_import({args.begin() + 2, args.end()});
  if (args.size() >= 2 && args[0] == "graph" && args[1] == "export")
    return runnel::cli::graph_export({args.begin() + 2, args.end()});
  if (args.size() >= 2 && args[0] == "events" && args[1] == "cat")
    return runnel::cli::events_cat({args.begin() + 2, args.end()});
  if (args[0] == "events")
    return wants_help(args) ? (std::fputs(runnel::cli::events_usage, stdout), 0)
                            : usage_error("unknown events command", runnel::cli::events_usage);
  if (args.size() >= 2 && args[0] == "keras" && args[1] == "import")
    return runnel::cli::keras_import({args.begin() + 2, args.end()});
  if (args[0] == "keras")
    return wants_help(args) ? (std::fputs(runnel::cli::keras_usage, stdout), 0)
                            : usage_error("unknown keras command", runnel::cli::keras_usage);
  if (args[0] == "ops")
    return runnel::cli::ops({args.begin() + 1, args.end()});
  if (args[0] == "run")
    return runnel::cli::run_model({args.begin() + 1, args.end()});
  if (args.size() >= 2 && args[0] == "graph" && args[1] == "dot")
    return graph_dot({args.begin() + 2, args.end()});
  if (args.size() >= 2 && args[0] == "records" && args[1] == "convert")
    return runnel::cli::records_convert({args.begin() + 2, args.end()});
  if (args.size() >= 2 && args[0] == "records" && args[1] == "stats")
    return runnel::cli::records_stats({args.begin() + 2, args.end()});
  if (args.size() >= 2 && args[0] == "records" && args[1] == "cat")
    return runnel::cli::records_cat({args.begin() + 2, args.end()});
  if (args.size() >= 2 && args[0] == "records" &&
      (args[1] == "count" || args[1] == "verify" || args[1] == "index"))
    return runnel::cli::records(args[1], {args.begin() + 2, args.end()});
  if (args[0] == "records")
    return wants_help(args) ? (std::fputs(runnel::cli::records_usage, stdout), 0)
                            : usage_error(args.size() < 2 ? "records needs a command"
                                                          : "unknown records command '" +
                                                                args[1] + "'",
                                          runnel::cli::records_usage);
  if (args[0] == "ckpt")
    return args.size() >= 2 && wants_help(args)
               ? (std::fputs(runnel::cli::ckpt_usage, stdout), 0)
               : usage_error("unknown ckpt command", runnel::cli::ckpt_usage);
  if (args[0] == "graph")
    return args.size() >= 2 && wants_help(args) ? (std::fputs(graph_usage, stdout), 0)
                                                : usage_error("unknown graph command", graph_usage);
  return usage_error("unknown command '" + args[0] + "'", main_usage);
}
