// `runnel graph import|export` and `runnel run`: TensorFlow GraphDefs and NumPy arrays from the
// command line (docs/interop.md).
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "runnel/actors/exec/session.hpp"
#include "runnel/apps/cli/cli_common.hpp"
#include "runnel/net/graph_def.hpp"
#include "runnel/ops/cpu/builtin_kernels.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/kernel/kernel.hpp"
#include "runnel/placement/prune.hpp"
#include "runnel/storage/npy.hpp"
#include "runnel/storage/tf/meta_graph.hpp"
#include "runnel/storage/tf/saved_model.hpp"
#include "runnel/storage/tf/tf_checkpoint.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

namespace runnel::cli {
namespace {

const char* import_usage =
    "usage: runnel graph import MODEL.pb|MODEL.pbtxt|MODEL.meta [--out FILE.graph]\n"
    "       runnel graph import SAVED_MODEL_DIR [--tags serve[,gpu]]\n"
    "Reads a TensorFlow GraphDef (binary or text), checks every node against Runnel's ops, and\n"
    "prints its size, ops, inputs (placeholders) and outputs (tensors no node reads). --out\n"
    "saves it as a Runnel graph file. Unsupported ops are all named, with their nodes.\n"
    "A MetaGraphDef (.meta, what tf.train.Saver writes beside a checkpoint) imports without its\n"
    "savers' nodes; its variables, collections, signatures and the checkpoint beside it are\n"
    "listed too (restore it with saver::restore; docs/interop.md).\n"
    "A SavedModel directory lists its tag sets, and the MetaGraph tagged --tags (default serve):\n"
    "its variables, init op and signatures with their tensors (run one with runnel run).\n";

const char* export_usage =
    "usage: runnel graph export GRAPH OUT.pb|OUT.pbtxt\n"
    "Writes a graph (a Runnel graph file or a TensorFlow GraphDef) as a TensorFlow GraphDef:\n"
    "binary, or text when OUT ends in .pbtxt or .txt.\n";

std::string describe_output(const graph& g, endpoint e) {
  auto& n = g.at(e.node);
  return g.endpoint_name(e) + " " + std::string(name(n.output_types[size_t(e.index)])) +
         n.output_shapes[size_t(e.index)].to_string();
}

} // namespace

result<graph> load_any_graph(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return not_found("cannot open " + path + ": " + std::strerror(errno));
  char head[8] = {};
  in.read(head, 8);
  if (is_runnel_graph_file(std::string_view(head, size_t(in.gcount()))))
    return load_graph(path);
  return import_tf_graph(path);
}

result<optimized_graph> optimized_graph_of(const graph& g,
                                           const std::vector<std::string>& fetches) {
  graph_signature sig;
  for (auto& name : fetches) {
    auto e = g.find_endpoint(name);
    if (!e)
      return e.error().with_context("--fetch");
    sig.fetches.push_back(*e);
  }
  if (fetches.empty()) {
    std::vector<char> read(size_t(g.num_nodes()), 0);
    for (auto& n : g.nodes()) {
      for (auto e : n.inputs)
        read[size_t(e.node)] = 1;
      for (int c : n.control_inputs)
        read[size_t(c)] = 1;
    }
    for (int v = 0; v < g.num_nodes(); ++v)
      if (!read[size_t(v)])
        for (int i = 0; i < std::max(1, g.at(v).num_outputs()); ++i) {
          if (g.at(v).num_outputs() == 0) {
            sig.targets.push_back(v);
            break;
          }
          sig.fetches.push_back({v, i});
        }
  }
  std::vector<int> roots(sig.targets);
  for (auto e : sig.fetches)
    roots.push_back(e.node);
  auto needed = prune(g, roots, {});
  RUNNEL_ASSIGN_OR_RETURN(auto opts, graph_optimizer_options::from_environment({}));
  cpu_device cpu(0);
  return optimize_graph(g, needed, sig, opts,
                        graph_optimizer_context{.kernels = &builtin_kernels(), .cpu = &cpu});
}

const char* run_usage =
    "usage: runnel run MODEL --feed NAME=FILE.npy... --fetch NAME... [--out FILE.npy...]\n"
    "                  [--feed-text NAME=TEXT...] [--batch N]\n"
    "       runnel run SAVED_MODEL_DIR [--tags serve[,gpu]] [--signature KEY] --feed "
    "KEY=FILE.npy...\n"
    "                  [--fetch KEY...] [--out FILE.npy...]\n"
    "Runs a graph (TensorFlow .pb/.pbtxt or a Runnel graph file) once on this machine: each\n"
    "--feed gives a placeholder's value from a NumPy file (--feed-text: a string scalar, e.g. a\n"
    "word for an exported g2p model), each --fetch names a tensor to\n"
    "compute (\"softmax\" or \"split:1\"), and the i-th --out receives the i-th fetch (fetches\n"
    "without an --out are printed). --batch N splits the feeds along their first dimension into\n"
    "steps of N rows and joins the fetched rows again (for graphs with a fixed batch size).\n"
    "A SavedModel directory loads as TensorFlow serves it (the MetaGraph tagged --tags, default\n"
    "serve; variables restored; its main op run); --signature picks one (default\n"
    "serving_default), --feed and --fetch name the signature's keys, and without --fetch every\n"
    "output is computed.\n";

namespace {

/// What a MetaGraphDef holds besides its graph, and the checkpoint beside it.
void print_meta_graph(const tf_meta_graph& mg, const std::string& file) {
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (auto& s : v)
      out += (out.empty() ? "" : ", ") + s;
    return out.empty() ? std::string("none") : out;
  };
  std::printf("MetaGraphDef written by TensorFlow %s; tags: %s\n",
              mg.tensorflow_version.empty() ? "(not said)" : mg.tensorflow_version.c_str(),
              join(mg.tags).c_str());
  std::printf("variables (%zu): %s\n", mg.variables.size(), join(mg.variables).c_str());
  std::printf("savers left out: %s%s\n", join(mg.left_out).c_str(),
              mg.restore_op.empty() ? "" : (" (its restore op: " + mg.restore_op + ")").c_str());
  for (auto& [name, what] : mg.collections)
    std::printf("collection %s: %s\n", name.c_str(), what.c_str());
  for (auto& [key, sig] : mg.signatures)
    std::printf("signature %s (%s): %zu inputs, %zu outputs\n", key.c_str(), sig.method.c_str(),
                sig.inputs.size(), sig.outputs.size());
  std::string prefix = file.substr(0, file.rfind(".meta"));
  if (is_tf_checkpoint(prefix))
    std::printf("checkpoint beside it: %s\n", prefix.c_str());
}

} // namespace

int graph_import(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(import_usage, stdout);
    return 0;
  }
  std::string file, out, tags = "serve";
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == "--tags" && i + 1 < args.size())
      tags = args[++i];
    else
      rest.push_back(args[i]);
  int rc = 0;
  if (!parse_file_and_out(rest, "graph import", import_usage, file, out, rc))
    return rc;
  if (file.empty())
    return usage_error("graph import needs a MODEL file", import_usage);
  if (is_tf_saved_model(file)) {
    if (!out.empty())
      return usage_error("graph import: --out takes a graph file, not a SavedModel", import_usage);
    return saved_model_show(file, tags);
  }
  bool meta = file.ends_with(".meta") || file.ends_with(".meta.pbtxt");
  result<graph> g = graph();
  if (meta) {
    auto mg = import_tf_meta_graph(file);
    if (!mg)
      return fail(mg.error());
    print_meta_graph(*mg, file);
    g = std::move(mg->graph);
  } else {
    g = import_tf_graph(file);
  }
  if (!g)
    return fail(g.error());
  std::map<std::string, int> ops;
  std::set<endpoint> consumed;
  for (auto& n : g->nodes()) {
    ++ops[n.op];
    for (auto e : n.inputs)
      consumed.insert(e);
  }
  std::printf("%s: %d nodes\nops:", file.c_str(), g->num_nodes());
  for (auto& [op, count] : ops)
    std::printf(" %s%s", op.c_str(), count > 1 ? (" (" + std::to_string(count) + ")").c_str() : "");
  std::printf("\ninputs:\n");
  for (auto& n : g->nodes())
    if (n.op == "Placeholder")
      std::printf("  %s\n", describe_output(*g, {n.id, 0}).c_str());
  std::printf("outputs:\n");
  for (auto& n : g->nodes())
    for (int i = 0; i < n.num_outputs(); ++i)
      if (!consumed.count({n.id, i}) && n.op != "Const" && n.op != "Placeholder")
        std::printf("  %s\n", describe_output(*g, {n.id, i}).c_str());
  if (!out.empty()) {
    if (auto s = save_graph(*g, out); !s.ok())
      return fail(s);
    std::printf("wrote %s\n", out.c_str());
  }
  return 0;
}

int graph_export(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(export_usage, stdout);
    return 0;
  }
  if (args.size() != 2 || args[0].starts_with('-') || args[1].starts_with('-'))
    return usage_error("graph export needs GRAPH and OUT", export_usage);
  auto g = load_any_graph(args[0]);
  if (!g)
    return fail(g.error());
  if (auto s = save_tf_graph(*g, args[1]); !s.ok())
    return fail(s);
  std::printf("wrote %s (%d nodes)\n", args[1].c_str(), g->num_nodes());
  return 0;
}

namespace {

/// The feed must fit the placeholder: same dtype, and every dimension the graph fixes.
status check_feed(const graph& g, const std::string& name, const tensor& t) {
  RUNNEL_ASSIGN_OR_RETURN(endpoint e, g.find_endpoint(name));
  auto& n = g.at(e.node);
  dtype want = n.output_types[size_t(e.index)];
  const shape& s = n.output_shapes[size_t(e.index)];
  std::string what = "feed '" + name + "'";
  if (t.type() != want)
    return invalid_argument(what + ": the graph expects " + std::string(runnel::name(want)) +
                            ", the file holds " + std::string(runnel::name(t.type())));
  if (!s.has_known_rank())
    return {};
  bool fits = s.rank() == t.rank();
  for (int i = 0; fits && i < s.rank(); ++i)
    fits = s[i] < 0 || s[i] == t.dim(i);
  if (!fits) {
    std::string hint;
    if (s.rank() == t.rank() && s.rank() > 0 && s[0] > 0 && t.dim(0) > s[0])
      hint = " (the graph has a fixed batch of " + std::to_string(s[0]) +
             "; pass --batch " + std::to_string(s[0]) + " to run it in steps)";
    return invalid_argument(what + ": the graph expects shape " + s.to_string() +
                            ", the file holds " + t.shape().to_string() + hint);
  }
  return {};
}

/// Rows [begin, end) of every feed.
named_feed_list slice_feeds(const named_feed_list& feeds, int64_t begin, int64_t end) {
  named_feed_list out;
  for (auto& [name, t] : feeds)
    out.emplace_back(name, t.slice(begin, std::min(end, t.dim(0))));
  return out;
}

/// Joins step results along the first dimension.
result<tensor> join_rows(const std::vector<tensor>& parts, const std::string& fetch) {
  if (parts.size() == 1)
    return parts[0];
  const tensor& first = parts[0];
  if (first.rank() < 1 || first.type() == dtype::string)
    return invalid_argument("fetch '" + fetch + "' is " + first.shape().to_string() +
                            ": --batch joins only numeric tensors with a first dimension");
  int64_t rows = 0;
  for (auto& p : parts) {
    if (p.rank() != first.rank() || p.type() != first.type())
      return invalid_argument("fetch '" + fetch + "' changes dtype or rank between steps");
    rows += p.dim(0);
  }
  std::vector<int64_t> dims = first.shape().dims();
  dims[0] = rows;
  tensor out(first.type(), shape(dims));
  char* dst = static_cast<char*>(out.raw_data());
  for (auto& p : parts) {
    std::memcpy(dst, p.raw_data(), p.bytes());
    dst += p.bytes();
  }
  return out;
}

} // namespace

namespace {

/// Parses `runnel run`'s arguments into `sm` (sm.dir: the MODEL) and `batch`; a usage error's
/// status when they do not parse, else -1.
int parse_run_args(const std::vector<std::string>& args, saved_model_run& sm, int64_t& batch) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if ((a == "--feed" || a == "--feed-text") && has_value) {
      auto& v = args[++i];
      auto eq = v.find('=');
      bool text = a == "--feed-text";
      if (eq == std::string::npos || eq == 0 || (!text && eq + 1 == v.size()))
        return usage_error(a + " needs " + (text ? "NAME=TEXT" : "NAME=FILE.npy") + ", got '" + v +
                               "'",
                           run_usage);
      (text ? sm.feed_texts : sm.feed_files).emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--fetch" && has_value) {
      sm.fetches.push_back(args[++i]);
    } else if (a == "--out" && has_value) {
      sm.outs.push_back(args[++i]);
    } else if (a == "--signature" && has_value) {
      sm.signature = args[++i];
    } else if (a == "--tags" && has_value) {
      sm.tags = args[++i];
    } else if (a == "--batch" && has_value) {
      char* end = nullptr;
      batch = std::strtoll(args[++i].c_str(), &end, 10);
      if (*end || batch < 1)
        return usage_error("--batch needs a positive number, got '" + args[i] + "'", run_usage);
    } else if (!a.empty() && a[0] != '-' && sm.dir.empty()) {
      sm.dir = a;
    } else {
      return usage_error("run: unexpected argument '" + a + "'", run_usage);
    }
  }
  return -1;
}

} // namespace

int run_model(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(run_usage, stdout);
    return 0;
  }
  saved_model_run sm; // the options, as a SavedModel directory takes them too
  int64_t batch = 0;
  if (int rc = parse_run_args(args, sm, batch); rc >= 0)
    return rc;
  const std::string& model = sm.dir;
  const auto& [feed_files, feed_texts, fetches, outs] =
      std::tie(sm.feed_files, sm.feed_texts, sm.fetches, sm.outs);
  if (!model.empty() && is_tf_saved_model(model))
    return run_saved_model(sm, batch, run_usage);
  if (!sm.signature.empty() || !sm.tags.empty())
    return usage_error("run: --signature and --tags are for SavedModel directories, and " + model +
                           " is not one",
                       run_usage);
  if (model.empty() || fetches.empty())
    return usage_error("run needs a MODEL and at least one --fetch", run_usage);
  if (outs.size() > fetches.size())
    return usage_error(std::to_string(outs.size()) + " --out files for " +
                           std::to_string(fetches.size()) + " --fetch tensors",
                       run_usage);
  auto g = load_any_graph(model);
  if (!g)
    return fail(g.error());
  for (auto& f : fetches)
    if (auto e = g->find_endpoint(f); !e)
      return fail(e.error().with_context("--fetch"));
  named_feed_list feeds;
  int64_t rows = -1;
  for (auto& [name, file] : feed_files) {
    auto t = read_npy(file);
    if (!t)
      return fail(t.error());
    if (batch) {
      if (t->rank() < 1)
        return fail(invalid_argument("feed '" + name + "' is a scalar; --batch splits rows"));
      if (rows >= 0 && t->dim(0) != rows)
        return fail(invalid_argument("feed '" + name + "' has " + std::to_string(t->dim(0)) +
                                     " rows, another feed " + std::to_string(rows)));
      rows = t->dim(0);
      auto step = slice_feeds({{name, *t}}, 0, batch);
      if (auto s = check_feed(*g, name, step[0].second); !s.ok())
        return fail(s.with_context(file));
    } else if (auto s = check_feed(*g, name, *t); !s.ok()) {
      return fail(s.with_context(file));
    }
    feeds.emplace_back(name, std::move(t).value());
  }
  for (auto& [name, text] : feed_texts) {
    auto t = tensor::scalar<std::string>(text);
    if (batch)
      return fail(invalid_argument("--feed-text '" + name + "' is a scalar; --batch splits rows"));
    if (auto s = check_feed(*g, name, t); !s.ok())
      return fail(s.with_context("--feed-text " + name));
    feeds.emplace_back(name, std::move(t));
  }
  runtime rt;
  session_options options;
  options.allow_soft_placement = true; // a frozen graph may name GPUs this machine lacks
  session s(rt, *g, options);
  std::vector<std::vector<tensor>> parts(fetches.size());
  auto start = std::chrono::steady_clock::now();
  int64_t steps = 0;
  for (int64_t begin = 0; begin == 0 || (batch && begin < rows); begin += std::max<int64_t>(batch, 1)) {
    auto step_feeds = batch ? slice_feeds(feeds, begin, begin + batch) : feeds;
    auto r = s.run(step_feeds, fetches);
    if (!r)
      return fail(batch ? r.error().with_context("step at row " + std::to_string(begin))
                        : r.error());
    for (size_t i = 0; i < fetches.size(); ++i)
      parts[i].push_back(std::move((*r)[i]));
    ++steps;
    if (!batch)
      break;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < fetches.size(); ++i) {
    auto t = join_rows(parts[i], fetches[i]);
    if (!t)
      return fail(t.error());
    if (i < outs.size()) {
      if (auto st = write_npy(outs[i], *t); !st.ok())
        return fail(st);
      std::fprintf(stderr, "%s -> %s (%s%s)\n", fetches[i].c_str(), outs[i].c_str(),
                   std::string(name(t->type())).c_str(), t->shape().to_string().c_str());
    } else {
      std::printf("%s = %s\n", fetches[i].c_str(), t->to_string().c_str());
    }
  }
  std::fprintf(stderr, "ran %lld step%s in %.3f s\n", static_cast<long long>(steps),
               steps == 1 ? "" : "s", seconds);
  return 0;
}

} // namespace runnel::cli
