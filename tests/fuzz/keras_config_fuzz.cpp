// A Keras model_config (JSON) built into a graph, with weights of plausible shapes for layers
// named as Keras names them: what `runnel keras import` does after reading the .h5 file (the
// HDF5 side is the checkpoint target's).
#include "runnel/storage/keras/keras_import.hpp"

using namespace runnel;

namespace {

const keras_weights& weights() {
  static const keras_weights w = [] {
    auto fill = [](shape s) {
      tensor t(dtype::f32, s);
      for (int64_t i = 0; i < t.num_elements(); ++i)
        t.data<float>()[i] = 0.01f * float(i % 7);
      return t;
    };
    keras_weights out;
    out["dense"] = {{"kernel", fill({4, 4})}, {"bias", fill({4})}};
    out["conv2d"] = {{"kernel", fill({3, 3, 1, 4})}, {"bias", fill({4})}};
    out["embedding"] = {{"embeddings", fill({10, 4})}};
    out["lstm"] = {{"kernel", fill({4, 16})}, {"recurrent_kernel", fill({4, 16})},
                   {"bias", fill({16})}};
    out["gru"] = {{"kernel", fill({4, 12})}, {"recurrent_kernel", fill({4, 12})},
                  {"bias", fill({2, 12})}};
    out["batch_normalization"] = {{"gamma", fill({4})}, {"beta", fill({4})},
                                  {"moving_mean", fill({4})}, {"moving_variance", fill({4})}};
    return out;
  }();
  return w;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)build_keras_model(text, weights(), "fuzz input", "2.11.0");
  return 0;
}
