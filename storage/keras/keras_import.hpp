#pragma once
// Keras models (.h5, as Keras 2 and Keras 3 save them) as Runnel graphs with their weights.
//
//   auto m = import_keras_model("model.h5");   // errors name the file and the layer
//   if (!m) { std::cerr << m.error().to_string(); return 1; }
//   session s(rt, m->g);
//   auto y = s.run({{m->inputs[0], x}}, {m->outputs[0]});
//   throw_if_error(save_tf_graph(m->g, "model.pb"));   // for `runnel run`
//
// The graph comes from the file's `model_config` (Sequential or functional models) and the
// weights from `model_weights/<layer>/...` (Keras 2's `<layer>/<name>:0` and Keras 3's
// `<model>/<layer>/<name>` paths), as constants: an inference graph. Its placeholders are named
// after the model's input layers and each layer's output after the layer (so `dense_1` is the
// output of layer dense_1). Layers: InputLayer, Dense, Conv2D, MaxPooling2D, AveragePooling2D,
// Flatten, Dropout, BatchNormalization, Activation, ReLU, Softmax, Embedding, LSTM, GRU, Reshape,
// Add, Concatenate. Every unsupported layer is named, with its class, in one error.
// docs/keras.md walks through it.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

struct keras_model {
  graph g;
  std::string name;          ///< the model's name ("sequential")
  std::string class_name;    ///< "Sequential", "Functional" or "Model"
  std::string keras_version; ///< the file's keras_version attribute, if any
  std::vector<std::string> inputs;  ///< placeholder names, in the model's input order
  std::vector<std::string> outputs; ///< output tensor names, in the model's output order
  int layers = 0;
};

result<keras_model> import_keras_model(const std::string& h5_path);

/// Weights by layer, then by short name ("kernel", "bias", "recurrent_kernel", "gamma", ...).
using keras_weights = std::map<std::string, std::map<std::string, tensor>>;
/// The graph of a `model_config` JSON text with these weights (what import_keras_model does once
/// it has read the file); `source` names the origin in errors.
result<keras_model> build_keras_model(std::string_view model_config, const keras_weights& weights,
                                      const std::string& source,
                                      const std::string& keras_version = "");

} // namespace runnel
