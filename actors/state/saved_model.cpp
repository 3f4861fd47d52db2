// Loading a SavedModel into a session and running its signatures; exporting one
// (saved_model.hpp).
#include "runnel/actors/state/saved_model.hpp"

#include <filesystem>

#include "runnel/actors/state/saver.hpp"
#include "runnel/storage/tf/tf_checkpoint.hpp"

namespace runnel {

namespace {

template <class Map> std::string keys_of(const Map& m) {
  std::string out;
  for (auto& [k, v] : m)
    out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? std::string("none") : out;
}

/// The value must fit what the signature declares: its dtype, its rank and known dimensions.
status check_input(const tf_tensor_info& want, const tensor& t, const std::string& what) {
  if (t.type() != want.type)
    return invalid_argument(what + ": the signature takes " + std::string(name(want.type)) +
                            ", got " + std::string(name(t.type())));
  if (!want.dims.has_known_rank())
    return {};
  bool fits = want.dims.rank() == t.rank();
  for (int i = 0; fits && i < t.rank(); ++i)
    fits = want.dims[i] < 0 || want.dims[i] == t.dim(i);
  if (!fits)
    return invalid_argument(what + ": the signature takes shape " + want.dims.to_string() +
                            ", got " + t.shape().to_string());
  return {};
}

/// Restores the model's variables through its own saver's keys.
status restore_variables(runnel::session& s, graph& g, const tf_saved_model& m) {
  if (m.meta.variables.empty())
    return {};
  if (!m.meta.sliced_variables.empty())
    return unimplemented("the saver restores partitioned variables part by part, which this "
                         "loader does not: " +
                         m.meta.sliced_variables.front() +
                         (m.meta.sliced_variables.size() > 1 ? ", ..." : ""));
  std::vector<output> vars;
  restore_options options;
  for (auto& name : m.meta.variables) {
    if (!m.meta.checkpoint_keys.empty() && !m.meta.checkpoint_keys.count(name))
      continue; // TensorFlow's saver restores only what it was made for
    int id = *g.find(name);
    vars.emplace_back(&g, endpoint{id, 0});
    if (auto it = m.meta.checkpoint_keys.find(name); it != m.meta.checkpoint_keys.end())
      options.name_map[variable_checkpoint_name(g.at(id))] = it->second;
  }
  if (vars.empty())
    return {};
  try {
    saver sv(g, vars);
    return sv.restore(s, m.variables_prefix, options);
  } catch (const error& e) { // the saver refuses what is not a variable
    return e.get_status();
  }
}

} // namespace

saved_model::~saved_model() = default;

result<std::unique_ptr<saved_model>> saved_model::load(runtime& rt, const std::string& dir,
                                                       const std::vector<std::string>& tags,
                                                       session_options options) {
  std::unique_ptr<saved_model> m(new saved_model());
  RUNNEL_ASSIGN_OR_RETURN(m->model_, read_tf_saved_model(dir, tags));
  graph& g = m->model_.meta.graph;
  m->session_ = std::make_unique<runnel::session>(rt, g, options);
  if (auto s = restore_variables(*m->session_, g, m->model_); !s.ok())
    return s.with_context(dir + ": restoring the variables");
  if (!m->model_.init_op.empty())
    if (auto s = m->session_->run(named_feed_list{}, {}, {m->model_.init_op}); !s.ok())
      return s.error().with_context(dir + ": running the init op '" + m->model_.init_op + "'");
  return m;
}

result<std::map<std::string, tensor>> saved_model::run(const std::string& key,
                                                       const std::map<std::string, tensor>& inputs,
                                                       const std::vector<std::string>& outputs) {
  auto it = signatures().find(key);
  if (it == signatures().end())
    return not_found("no signature '" + key + "' in " + model_.dir +
                     "; its signatures: " + keys_of(signatures()));
  const tf_signature& sig = it->second;
  std::string where = "signature '" + key + "'";
  named_feed_list feeds;
  for (auto& [k, t] : inputs) {
    auto in = sig.inputs.find(k);
    if (in == sig.inputs.end())
      return invalid_argument(where + " has no input '" + k +
                              "'; its inputs: " + keys_of(sig.inputs));
    RUNNEL_RETURN_IF_ERROR(check_input(in->second, t, where + " input '" + k + "'"));
    feeds.emplace_back(in->second.name, t);
  }
  std::vector<std::string> keys = outputs, fetches;
  if (keys.empty())
    for (auto& [k, t] : sig.outputs)
      keys.push_back(k);
  for (auto& k : keys) {
    auto out = sig.outputs.find(k);
    if (out == sig.outputs.end())
      return invalid_argument(where + " has no output '" + k +
                              "'; its outputs: " + keys_of(sig.outputs));
    fetches.push_back(out->second.name);
  }
  auto r = session_->run(feeds, fetches);
  if (!r)
    return r.error().with_context(where);
  std::map<std::string, tensor> out;
  for (size_t i = 0; i < keys.size(); ++i)
    out.emplace(keys[i], std::move((*r)[i]));
  return out;
}

status save_saved_model(runnel::session& s, const graph& g, const std::string& dir,
                        const std::map<std::string, saved_model_signature>& signatures,
                        const std::vector<std::string>& tags) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec))
    return already_exists("save_saved_model: " + dir +
                          " exists; a SavedModel is written into a new directory");
  std::map<std::string, tf_signature> sigs;
  for (auto& entry : signatures) {
    const std::string& key = entry.first; // a plain name: lambdas below capture it
    const saved_model_signature& spec = entry.second;
    tf_signature& out = sigs[key];
    out.method = spec.method;
    auto describe = [&](const std::string& k, const std::string& name,
                        std::map<std::string, tf_tensor_info>& to) -> status {
      auto e = g.find_endpoint(name);
      if (!e)
        return e.error().with_context("signature '" + key + "' tensor '" + k + "'");
      auto& n = g.at(e->node);
      // "name:index" always: TensorFlow's loader looks tensors up by that form only.
      to[k] = {n.name + ":" + std::to_string(e->index), n.output_types[size_t(e->index)],
               n.output_shapes[size_t(e->index)]};
      return {};
    };
    for (auto& [k, name] : spec.inputs)
      RUNNEL_RETURN_IF_ERROR(describe(k, name, out.inputs));
    for (auto& [k, name] : spec.outputs)
      RUNNEL_RETURN_IF_ERROR(describe(k, name, out.outputs));
  }
  std::vector<std::string> names;
  for (int id : g.collection("variables"))
    names.push_back(g.at(id).name);
  std::map<std::string, tensor> values;
  if (!names.empty()) {
    RUNNEL_ASSIGN_OR_RETURN(auto fetched, s.run(named_feed_list{}, names));
    for (size_t i = 0; i < names.size(); ++i)
      values.emplace(names[i], std::move(fetched[i]));
  }
  fs::create_directories(fs::path(dir) / "variables", ec);
  if (ec)
    return unavailable("cannot create " + dir + "/variables: " + ec.message());
  if (!values.empty())
    RUNNEL_RETURN_IF_ERROR(
        write_tf_checkpoint((fs::path(dir) / "variables" / "variables").string(), values));
  return write_tf_saved_model_file((fs::path(dir) / "saved_model.pb").string(), g, names, sigs,
                                   tags);
}

} // namespace runnel
