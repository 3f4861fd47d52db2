#pragma once
// Keras layers as Runnel ops (internal to storage/keras/). Each builder takes the layer's config,
// its inputs and its weights (by their short names: kernel, bias, recurrent_kernel, gamma, ...)
// and returns its output; errors say what is wrong, and the caller names the layer and file.

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel::keras {

struct layer_call {
  graph& g;
  const nlohmann::json& config;
  std::vector<output> inputs;
  const std::map<std::string, tensor>& weights;
  int keras_major; ///< 2 or 3: activations whose definition changed (hard_sigmoid)
};

using layer_builder = std::function<output(layer_call&)>;

/// A JSON number that must be an integer within ±2^40 (a dimension, an index, a count): anything
/// else (a string, 1e300, 2.5) is an error naming `what`. nlohmann's own conversion of an
/// out-of-range float is undefined behaviour.
int64_t json_int(const nlohmann::json& j, const std::string& what);

/// Builders by Keras class name.
const std::map<std::string, layer_builder>& layer_builders();

} // namespace runnel::keras
