#include "actors/saver.hpp"

#include <cstdio>
#include <filesystem>

#include "storage/checkpoint.hpp"

namespace runnel {
namespace {

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
    e.name = variable_resource_name(n);
    e.ref = v;
    shape declared = n.output_shapes[0];
    auto col = g.colocate_with(v);
    // The fed value goes where the variable is: a restore moves each value once.
    e.feed = placeholder(g, n.output_types[0], declared, "restore_value");
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
  path += ".h5";
  auto [dir, file] = split_path(path);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return unavailable("cannot create directory " + dir + ": " + ec.message());
  RUNNEL_RETURN_IF_ERROR(write_checkpoint(path, tensors, global_step));

  checkpoint_state st;
  if (auto old = read_checkpoint_state(dir))
    st = *old;
  st.all.erase(std::remove(st.all.begin(), st.all.end(), file), st.all.end());
  st.all.push_back(file);
  st.latest = file;
  if (options_.max_to_keep > 0)
    while (int(st.all.size()) > options_.max_to_keep) {
      std::filesystem::remove(std::filesystem::path(dir) / st.all.front(), ec);
      st.all.erase(st.all.begin());
    }
  RUNNEL_RETURN_IF_ERROR(write_checkpoint_state(dir, st));
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
  RUNNEL_ASSIGN_OR_RETURN(auto tensors, read_checkpoint_tensors(path, file_names));
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
  RUNNEL_ASSIGN_OR_RETURN(auto st, read_checkpoint_state(dir));
  return (std::filesystem::path(dir) / st.latest).string();
}

} // namespace runnel
