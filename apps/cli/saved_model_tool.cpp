// SavedModels from the command line: `runnel graph import DIR` lists what one holds, and
// `runnel run DIR --signature KEY` runs a signature on NumPy arrays (docs/interop.md).
#include <cstdio>

#include "runnel/actors/state/saved_model.hpp"
#include "runnel/apps/cli/cli_common.hpp"
#include "runnel/storage/npy.hpp"

namespace runnel::cli {

namespace {

std::vector<std::string> split_tags(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    auto comma = s.find(',', start);
    auto tag = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!tag.empty())
      out.push_back(tag);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return out;
}

std::string describe(const tf_tensor_info& t) {
  return t.name + " " + std::string(name(t.type)) + t.dims.to_string();
}

} // namespace

int saved_model_show(const std::string& dir, const std::string& tags) {
  auto m = read_tf_saved_model(dir, split_tags(tags));
  if (!m)
    return fail(m.error());
  std::printf("SavedModel %s: %zu MetaGraph%s\n", dir.c_str(), m->tag_sets.size(),
              m->tag_sets.size() == 1 ? "" : "s");
  for (auto& t : m->tag_sets)
    std::printf("  tags: %s\n", tag_set_string(t).c_str());
  auto& mg = m->meta;
  std::printf("MetaGraph {%s}: %d nodes, written by TensorFlow %s\n", tags.c_str(),
              mg.graph.num_nodes(),
              mg.tensorflow_version.empty() ? "(not said)" : mg.tensorflow_version.c_str());
  std::printf("variables (%zu) from %s\n", mg.variables.size(),
              m->variables_prefix.empty() ? "(none)" : m->variables_prefix.c_str());
  std::printf("init op: %s\n", m->init_op.empty() ? "(none)" : m->init_op.c_str());
  for (auto& [key, sig] : mg.signatures) {
    std::printf("signature %s (%s):\n", key.c_str(), sig.method.c_str());
    for (auto& [k, t] : sig.inputs)
      std::printf("  input  %s: %s\n", k.c_str(), describe(t).c_str());
    for (auto& [k, t] : sig.outputs)
      std::printf("  output %s: %s\n", k.c_str(), describe(t).c_str());
  }
  return 0;
}

int run_saved_model(const saved_model_run& r, int64_t batch, const char* usage) {
  if (batch)
    return usage_error("run: --batch is for graph files, not SavedModels", usage);
  if (!r.fetches.empty() && r.outs.size() > r.fetches.size())
    return usage_error(std::to_string(r.outs.size()) + " --out files for " +
                           std::to_string(r.fetches.size()) + " --fetch keys",
                       usage);
  std::string tags = r.tags.empty() ? "serve" : r.tags;
  runtime rt;
  session_options options;
  options.allow_soft_placement = true; // an export may name GPUs this machine lacks
  auto m = saved_model::load(rt, r.dir, split_tags(tags), options);
  if (!m)
    return fail(m.error());
  std::string key = r.signature;
  if ((*m)->signatures().empty())
    return fail(invalid_argument(r.dir + ": the MetaGraph {" + tags +
                                 "} has no signatures "
                                 "to run (runnel graph import DIR --tags T lists each one's)"));
  if (key.empty()) {
    if (!(*m)->signatures().count("serving_default")) {
      std::string keys;
      for (auto& [k, s] : (*m)->signatures())
        keys += (keys.empty() ? "" : ", ") + k;
      return fail(invalid_argument(r.dir +
                                   " has no serving_default signature; pass --signature "
                                   "KEY, one of: " +
                                   keys));
    }
    key = "serving_default";
  }
  std::map<std::string, tensor> inputs;
  for (auto& [name, file] : r.feed_files) {
    auto t = read_npy(file);
    if (!t)
      return fail(t.error());
    inputs.emplace(name, std::move(t).value());
  }
  for (auto& [name, text] : r.feed_texts)
    inputs.emplace(name, tensor::scalar<std::string>(text));
  auto out = (*m)->run(key, inputs, r.fetches);
  if (!out)
    return fail(out.error());
  size_t i = 0;
  for (auto& [k, t] : *out) {
    // Outputs come back by key; --out files follow the --fetch order.
    size_t at = r.fetches.empty()
                    ? i++
                    : size_t(std::find(r.fetches.begin(), r.fetches.end(), k) - r.fetches.begin());
    if (at < r.outs.size()) {
      if (auto s = write_npy(r.outs[at], t); !s.ok())
        return fail(s);
      std::fprintf(stderr, "%s -> %s (%s%s)\n", k.c_str(), r.outs[at].c_str(),
                   std::string(name(t.type())).c_str(), t.shape().to_string().c_str());
    } else {
      std::printf("%s = %s\n", k.c_str(), t.to_string().c_str());
    }
  }
  return 0;
}

} // namespace runnel::cli
