#include "runnel/storage/keras/keras_import.hpp"

#include <nlohmann/json.hpp>

#include <set>

#include "runnel/ops/graph/builder.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/keras/keras_layers.hpp"

namespace runnel {
namespace {

using nlohmann::json;

/// A reference to a layer's output: (layer, node, tensor).
struct tensor_ref {
  std::string layer;
  int64_t node = 0, index = 0;
};

/// Keras 2: [[["dense", 0, 0, {}], ...]]; Keras 3: [{"args": [<keras tensor or list>], ...}].
void collect_keras3_refs(const json& j, std::vector<tensor_ref>& out) {
  if (j.is_object() && j.value("class_name", "") == "__keras_tensor__") {
    auto& h = j.at("config").at("keras_history");
    out.push_back({h.at(0).get<std::string>(), keras::json_int(h.at(1), "a keras_history node"),
                   keras::json_int(h.at(2), "a keras_history tensor")});
  } else if (j.is_array()) {
    for (auto& e : j)
      collect_keras3_refs(e, out);
  } else if (j.is_object() && j.contains("args")) {
    collect_keras3_refs(j.at("args"), out);
  }
}

std::vector<std::vector<tensor_ref>> inbound_of(const json& layer) {
  std::vector<std::vector<tensor_ref>> calls;
  auto it = layer.find("inbound_nodes");
  if (it == layer.end())
    return calls;
  for (auto& node : *it) {
    std::vector<tensor_ref> refs;
    if (node.is_object()) {
      collect_keras3_refs(node, refs);
    } else {
      for (auto& r : node)
        refs.push_back({r.at(0).get<std::string>(), keras::json_int(r.at(1), "an inbound node"),
                        keras::json_int(r.at(2), "an inbound tensor")});
    }
    calls.push_back(std::move(refs));
  }
  return calls;
}

tensor_ref ref_of(const json& j) {
  return {j.at(0).get<std::string>(), j.size() > 1 ? keras::json_int(j.at(1), "a layer's node") : 0,
          j.size() > 2 ? keras::json_int(j.at(2), "a layer's tensor") : 0};
}

/// The placeholder shape of an InputLayer (or a Keras 2 first layer's batch_input_shape).
shape input_shape(const json& config) {
  for (const char* key : {"batch_input_shape", "batch_shape"})
    if (auto it = config.find(key); it != config.end() && it->is_array()) {
      std::vector<int64_t> dims;
      for (auto& d : *it)
        dims.push_back(d.is_null() ? -1 : keras::json_int(d, "an input dimension"));
      return shape(dims);
    }
  if (auto it = config.find("shape"); it != config.end() && it->is_array()) {
    std::vector<int64_t> dims{-1};
    for (auto& d : *it)
      dims.push_back(d.is_null() ? -1 : keras::json_int(d, "an input dimension"));
    return shape(dims);
  }
  return shape::unknown();
}

dtype input_dtype(const json& config) {
  auto t = config.value("dtype", std::string("float32"));
  if (config.contains("dtype") && config["dtype"].is_object()) // Keras 3 DTypePolicy
    t = config["dtype"].value("config", json::object()).value("name", std::string("float32"));
  auto d = parse_dtype(t);
  if (!d)
    throw error(invalid_argument("input dtype '" + t + "' is not supported"));
  return *d;
}

struct builder_state {
  graph& g;
  const std::string& file;
  int keras_major;
  const keras_weights& weights; // layer -> short name -> value
  std::map<std::string, output> outputs; // "layer:node:index" -> tensor
  std::vector<std::string> input_names;

  static std::string key(const tensor_ref& r) {
    return r.layer + ":" + std::to_string(r.node) + ":" + std::to_string(r.index);
  }

  output placeholder_for(const std::string& name, const json& config) {
    auto x = placeholder(g, input_dtype(config), input_shape(config), name);
    if (x.node().name != name)
      throw error(invalid_argument("input '" + name + "' clashes with another node's name"));
    input_names.push_back(name);
    return x;
  }

  /// Builds one call of a layer; its output is an Identity named after the layer (the first
  /// call) or "<layer>_<call>".
  output call(const json& layer, const std::string& name, std::vector<output> inputs,
              size_t call_index) {
    auto cls = layer.at("class_name").get<std::string>();
    const json& config = layer.at("config");
    auto& builders = keras::layer_builders();
    static const std::map<std::string, tensor> no_weights;
    auto w = weights.find(name);
    keras::layer_call c{g, config, std::move(inputs), w == weights.end() ? no_weights : w->second,
                        keras_major};
    output y;
    {
      auto scope = g.name_scope(name);
      y = builders.at(cls)(c);
    }
    std::string out_name = call_index == 0 ? name : name + "_" + std::to_string(call_index);
    auto named = identity(y, out_name);
    if (named.node().name != out_name)
      throw error(invalid_argument("its output name '" + out_name +
                                   "' clashes with another node's name"));
    return named;
  }
};

result<keras_weights> read_weights(const std::string& path) {
  RUNNEL_ASSIGN_OR_RETURN(auto entries, list_checkpoint(path));
  std::vector<std::string> names;
  for (auto& e : entries)
    if (e.name.starts_with("model_weights/") && e.unsupported.empty())
      names.push_back(e.name);
  keras_weights out;
  if (names.empty())
    return out;
  RUNNEL_ASSIGN_OR_RETURN(auto values, read_checkpoint_tensors(path, names));
  for (auto& [name, value] : values) {
    // model_weights/<layer>/.../<weight>
    auto rest = std::string_view(name).substr(std::string_view("model_weights/").size());
    auto slash = rest.find('/');
    if (slash == std::string_view::npos)
      continue;
    std::string layer(rest.substr(0, slash));
    std::string short_name(rest.substr(rest.rfind('/') + 1));
    if (!out[layer].emplace(short_name, value).second)
      return data_loss(path + ": layer '" + layer + "' has two weights named '" + short_name + "'");
  }
  return out;
}

void build_sequential(builder_state& s, const json& layers, keras_model& m) {
  output x;
  size_t first = 0;
  if (layers.empty())
    throw error(invalid_argument("the Sequential model has no layers"));
  const json& head = layers.at(0);
  if (head.at("class_name") == "InputLayer") {
    x = s.placeholder_for(head.at("config").at("name").get<std::string>(), head.at("config"));
    first = 1;
  } else {
    // Keras 2 without an InputLayer: the first layer's batch_input_shape gives the input.
    auto name = head.at("config").at("name").get<std::string>() + "_input";
    x = s.placeholder_for(name, head.at("config"));
  }
  std::string last = s.input_names.back();
  for (size_t i = first; i < layers.size(); ++i) {
    auto name = layers[i].at("config").at("name").get<std::string>();
    try {
      x = s.call(layers[i], name, {x}, 0);
    } catch (const error& e) {
      throw error(e.get_status().with_context("layer '" + name + "' (" +
                                              layers[i].at("class_name").get<std::string>() + ")"));
    }
    last = x.node().name;
  }
  m.outputs = {last};
}

void build_functional(builder_state& s, const json& config, keras_model& m) {
  for (auto& layer : config.at("layers")) {
    auto name = layer.contains("name") ? layer.at("name").get<std::string>()
                                       : layer.at("config").at("name").get<std::string>();
    auto cls = layer.at("class_name").get<std::string>();
    if (cls == "InputLayer") {
      s.outputs[builder_state::key({name, 0, 0})] = s.placeholder_for(name, layer.at("config"));
      continue;
    }
    auto calls = inbound_of(layer);
    for (size_t k = 0; k < calls.size(); ++k) {
      std::vector<output> inputs;
      for (auto& r : calls[k]) {
        auto it = s.outputs.find(builder_state::key(r));
        if (it == s.outputs.end())
          throw error(invalid_argument("layer '" + name + "' takes the output of '" + r.layer +
                                       "', which comes later or does not exist"));
        inputs.push_back(it->second);
      }
      try {
        s.outputs[builder_state::key({name, int64_t(k), 0})] = s.call(layer, name, inputs, k);
      } catch (const error& e) {
        throw error(e.get_status().with_context("layer '" + name + "' (" + cls + ")"));
      }
    }
  }
  for (auto& o : config.at("output_layers")) {
    auto r = ref_of(o);
    auto it = s.outputs.find(builder_state::key(r));
    if (it == s.outputs.end())
      throw error(invalid_argument("output layer '" + r.layer + "' was not built"));
    m.outputs.push_back(it->second.node().name);
  }
  // The model's input order, as the file lists it.
  std::vector<std::string> ordered;
  for (auto& i : config.at("input_layers"))
    ordered.push_back(ref_of(i).layer);
  s.input_names = ordered;
}

/// Every layer class this importer lacks, named with its layers, in one error.
status check_supported(const json& layers) {
  std::map<std::string, std::vector<std::string>> missing;
  auto& builders = keras::layer_builders();
  for (auto& layer : layers) {
    auto cls = layer.at("class_name").get<std::string>();
    if (cls != "InputLayer" && !builders.count(cls))
      missing[cls].push_back("'" + layer.at("config").value("name", std::string("?")) + "'");
  }
  if (missing.empty())
    return {};
  std::string msg;
  for (auto& [cls, names] : missing) {
    msg += (msg.empty() ? "" : "; ") + cls + " (layer";
    msg += names.size() > 1 ? "s " : " ";
    for (size_t i = 0; i < names.size(); ++i)
      msg += (i ? ", " : "") + names[i];
    msg += ")";
  }
  return unimplemented("layers Runnel does not support: " + msg);
}

} // namespace

result<keras_model> import_keras_model(const std::string& path) {
  RUNNEL_ASSIGN_OR_RETURN(auto config_text, read_root_string_attribute(path, "model_config"));
  if (!config_text)
    return invalid_argument(path + " has no model_config attribute: it holds weights only "
                                   "(save_weights), not a model");
  std::string version;
  if (auto v = read_root_string_attribute(path, "keras_version"); v && *v)
    version = **v;
  auto weights = read_weights(path);
  if (!weights)
    return weights.error();
  return build_keras_model(*config_text, *weights, path, version);
}

result<keras_model> build_keras_model(std::string_view model_config, const keras_weights& weights,
                                      const std::string& path, const std::string& keras_version) {
  keras_model m;
  m.keras_version = keras_version;
  int major = keras_version.empty() || keras_version[0] < '0' || keras_version[0] > '9'
                  ? 2
                  : keras_version[0] - '0';
  json model;
  try {
    model = json::parse(model_config);
  } catch (const json::exception& e) {
    return data_loss(path + ": model_config is not valid JSON: " + e.what());
  }
  try {
    m.class_name = model.at("class_name").get<std::string>();
    const json& config = model.at("config");
    // Keras 2's oldest Sequential configs are the list of layers itself.
    const json& layers = config.is_array() ? config : config.at("layers");
    m.name = config.is_object() ? config.value("name", m.class_name) : m.class_name;
    m.layers = int(layers.size());
    if (auto s = check_supported(layers); !s.ok())
      return s.with_context(path);
    builder_state s{m.g, path, major, weights, {}, {}};
    if (m.class_name == "Sequential")
      build_sequential(s, layers, m);
    else if (m.class_name == "Functional" || m.class_name == "Model")
      build_functional(s, config, m);
    else
      return unimplemented(path + ": model class '" + m.class_name +
                           "' is not supported (Sequential, Functional and Model are)");
    m.inputs = s.input_names;
  } catch (const json::exception& e) {
    return data_loss(path + ": model_config does not describe a Keras model as expected: " +
                     e.what());
  } catch (const error& e) {
    return e.get_status().with_context(path);
  }
  return m;
}

} // namespace runnel
