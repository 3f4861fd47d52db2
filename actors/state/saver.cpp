#include "runnel/actors/state/saver.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "runnel/placement/device_name.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/tf/tf_checkpoint.hpp"

namespace runnel {
namespace {

/// Deletes `*.h5.tmp` and `checkpoint.tmp` left in `dir` by a save that was killed mid-write.
void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec)) {
    auto name = e.path().filename().string();
    auto ends = [&](const std::string& s) {
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (ends(".h5.tmp") || ends(".index.tmp") || ends("-of-00001.tmp") || name == "checkpoint.tmp")
      std::filesystem::remove(e.path(), ec);
  }
}

/// The step in "prefix-<step>.h5" or TensorFlow's "prefix-<step>.index", or -1.
int64_t step_of(const std::string& file) {
  std::string ext =
      file.size() > 6 && file.compare(file.size() - 6, 6, ".index") == 0 ? ".index" : ".h5";
  auto dot = file.rfind(ext);
  auto dash = file.rfind('-', dot);
  if (dot == std::string::npos || dash == std::string::npos || dot != file.size() - ext.size())
    return -1;
  try {
    return std::stoll(file.substr(dash + 1, dot - dash - 1));
  } catch (...) {
    return -1;
  }
}

std::pair<std::string, std::string> split_path(const std::string& path) {
  std::filesystem::path p(path);
  auto dir = p.parent_path().string();
  return {dir.empty() ? "." : dir, p.filename().string()};
}

} // namespace

saver::saver(graph& g, std::vector<output> variables, saver_options options) : options_(options) {
  if (variables.empty())
    for (int id : g.collection("variables"))
      variables.emplace_back(&g, endpoint{id, 0});
  if (variables.empty())
    throw error(invalid_argument("saver: the graph has no variables to save"));
  auto root = g.name_scope("");
  auto scope = g.name_scope("save");
  auto no_deps = g.control_dependencies({});
  for (auto& v : variables) {
    const node& n = v.node();
    if (n.op != "VariableV2")
      throw error(invalid_argument("saver: '" + n.name + "' is not a variable (op " + n.op + ")"));
    entry e;
    e.name = variable_checkpoint_name(n);
    e.ref = v;
    shape declared = n.output_shapes[0];
    // The fed value goes to the variable's task, on its CPU: a restore moves each value once
    // (to a GPU variable through a host-to-device copy). Not colocated with the variable: a
    // Placeholder has no GPU kernel, and every node colocated with a variable must run where
    // it does, so that would pin GPU variables, and their updates, to the CPU.
    std::string feed_device;
    if (auto spec = device_spec::parse(n.device); spec && (spec->job || spec->task)) {
      spec->type = "CPU";
      spec->id = 0;
      feed_device = spec->to_string();
    }
    {
      auto on = g.device(feed_device);
      e.feed = placeholder(g, n.output_types[0], declared, "restore_value");
    }
    graph_variable gv{v, v, {}};
    e.assign = operation(assign(gv, e.feed, "restore"));
    entries_.push_back(std::move(e));
  }
}

result<std::string> saver::save(session& s, const std::string& prefix,
                                std::optional<int64_t> global_step) {
  std::vector<output> refs;
  for (auto& e : entries_)
    refs.push_back(e.ref);
  RUNNEL_ASSIGN_OR_RETURN(auto values, s.run({}, refs));
  std::map<std::string, tensor> tensors;
  for (size_t i = 0; i < entries_.size(); ++i)
    tensors.emplace(entries_[i].name, std::move(values[i]));
  std::string path = prefix;
  if (global_step)
    path += '-' + std::to_string(*global_step);
  bool tf_format = options_.format == checkpoint_format::tensorflow;
  if (!tf_format)
    path += ".h5";
  auto [dir, file] = split_path(path);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return unavailable("cannot create directory " + dir + ": " + ec.message());
  remove_stale_temporaries(dir);
  RUNNEL_RETURN_IF_ERROR(tf_format ? write_tf_checkpoint(path, tensors)
                                   : write_checkpoint(path, tensors, global_step));

  // The order makes every moment safe to die in: the new file is complete (written to a .tmp,
  // fsynced, renamed) before the state file names it, and the state file stops naming the oldest
  // before that file is deleted.
  checkpoint_state st;
  if (auto old = read_checkpoint_state(dir))
    st = *old;
  st.all.erase(std::remove(st.all.begin(), st.all.end(), file), st.all.end());
  st.all.push_back(file);
  st.latest = file;
  std::vector<std::string> dropped;
  if (options_.max_to_keep > 0)
    while (int(st.all.size()) > options_.max_to_keep) {
      dropped.push_back(st.all.front());
      st.all.erase(st.all.begin());
    }
  RUNNEL_RETURN_IF_ERROR(write_checkpoint_state(dir, st));
  for (auto& old : dropped) {
    auto p = std::filesystem::path(dir) / old;
    std::filesystem::remove(p, ec);
    if (is_tf_checkpoint(p.string())) { // the data shard first: an index never names a lost one
      std::filesystem::remove(p.string() + ".data-00000-of-00001", ec);
      std::filesystem::remove(p.string() + ".index", ec);
    }
  }
  return path;
}

status saver::restore(session& s, const std::string& path, const restore_options& options) {
  std::vector<const entry*> chosen;
  for (auto& e : entries_)
    if (options.only.empty() ||
        std::find(options.only.begin(), options.only.end(), e.name) != options.only.end())
      chosen.push_back(&e);
  for (auto& want : options.only)
    if (std::none_of(entries_.begin(), entries_.end(),
                     [&](const entry& e) { return e.name == want; }))
      return not_found("restore: '" + want + "' is not one of the saver's variables");
  std::vector<std::string> file_names;
  for (auto* e : chosen) {
    auto it = options.name_map.find(e->name);
    file_names.push_back(it == options.name_map.end() ? e->name : it->second);
  }
  auto read = read_any_checkpoint(path, file_names);
  if (!read) {
    std::string renamed;
    for (size_t i = 0; i < chosen.size(); ++i)
      if (file_names[i] != chosen[i]->name)
        renamed += (renamed.empty() ? "" : ", ") + chosen[i]->name + " as '" + file_names[i] + "'";
    return renamed.empty() ? read.error()
                           : read.error().with_context("restore (variables read under other "
                                                       "names: " +
                                                       renamed + ")");
  }
  auto& tensors = *read;
  feed_list feeds;
  std::vector<operation> targets;
  for (size_t i = 0; i < chosen.size(); ++i) {
    auto* e = chosen[i];
    tensor& t = tensors.at(file_names[i]);
    auto declared = e->ref.shape();
    std::string from = file_names[i] == e->name ? "" : " (as '" + file_names[i] + "')";
    if (t.type() != e->ref.type())
      return invalid_argument("restore: variable '" + e->name + "' is " +
                              std::string(name(e->ref.type())) + " but checkpoint " + path +
                              " holds " + std::string(name(t.type())) + from);
    if (!declared.is_compatible_with(t.shape()))
      return invalid_argument("restore: variable '" + e->name + "' has shape " +
                              declared.to_string() + " but checkpoint " + path + " holds " +
                              t.shape().to_string() + from);
    feeds.emplace_back(e->feed, t);
    targets.push_back(e->assign);
  }
  return s.run(feeds, {}, targets).error();
}

result<std::string> saver::latest_checkpoint(const std::string& dir) {
  std::vector<std::string> candidates;
  auto add = [&](const std::string& f) {
    if (!f.empty() && std::find(candidates.begin(), candidates.end(), f) == candidates.end())
      candidates.push_back(f);
  };
  auto st = read_checkpoint_state(dir);
  if (st) {
    add(st->latest);
    for (auto it = st->all.rbegin(); it != st->all.rend(); ++it)
      add(*it);
  }
  // Files the state file does not name (it was lost, or is older than they are), newest first.
  std::vector<std::pair<int64_t, std::string>> on_disk;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec)) {
    auto name = e.path().filename().string();
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".h5") == 0)
      on_disk.emplace_back(step_of(name), name);
    else if (name.size() > 6 && name.compare(name.size() - 6, 6, ".index") == 0)
      on_disk.emplace_back(step_of(name), name.substr(0, name.size() - 6));
  }
  std::sort(on_disk.rbegin(), on_disk.rend());
  for (auto& [step, name] : on_disk)
    add(name);
  if (candidates.empty())
    return st ? not_found("no checkpoint in " + dir + " (the state file names none that exist)")
              : st.error();
  std::string skipped;
  for (auto& c : candidates) {
    std::string path = (std::filesystem::path(dir) / c).string();
    bool tf_format = is_tf_checkpoint(path); // TensorFlow's prefix: path.index, path.data-*
    if (!tf_format && !std::filesystem::exists(path, ec)) {
      skipped += "\n  " + path + ": missing";
      continue;
    }
    status ok = verify_any_checkpoint(path);
    if (ok.ok()) {
      if (!skipped.empty())
        std::fprintf(stderr, "runnel: skipped unreadable checkpoints:%s\nrunnel: using %s\n",
                     skipped.c_str(), path.c_str());
      return path;
    }
    skipped += "\n  " + ok.message();
  }
  return data_loss("no readable checkpoint in " + dir + ":" + skipped);
}

std::string variable_checkpoint_name(const node& variable_node) {
  auto shared = get_attr<std::string>(variable_node.attrs, "shared_name");
  return shared.empty() ? variable_node.name : shared;
}

} // namespace runnel
