#pragma once
// Keras layers as Runnel ops (internal to storage/keras/). Each builder takes the layer's config,
// its inputs and its weights (by their short names: kernel, bias, recurrent_kernel, gamma, ...)
// and returns its output; errors say what is wrong, and the caller names the layer and file.

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runnel/ops/graph.hpp"

namespace runnel::keras {

struct layer_call {
  graph& g;
  const nlohmann::json& config;
  std::vector<output> inputs;
  const std::map<std::string, tensor>& weights;
  int keras_major; ///< 2 or 3: activations whose definition changed (hard_sigmoid)
};

using layer_builder = std::function<output(layer_call&)>;

/// Builders by Keras class name.
const std::map<std::string, layer_builder>& layer_builders();

} // namespace runnel::keras
