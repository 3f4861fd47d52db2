// Keras .h5 import. The models come from tests/keras/make_keras_models.py, which writes them with
// h5py as Keras 2 and Keras 3 lay them out and computes their outputs with NumPy.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runnel/actors/exec/session.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/keras/keras_import.hpp"
#include "runnel/storage/npy.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

using namespace runnel;
namespace fs = std::filesystem;

namespace {

const fs::path& models() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("runnel-keras-" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::string cmd = "/usr/bin/python3 " RUNNEL_SOURCE_DIR "/tests/keras/make_keras_models.py " +
                      d.string();
    if (std::system(cmd.c_str()) != 0)
      FAIL("make_keras_models.py failed");
    std::atexit([] {
      fs::remove_all(fs::temp_directory_path() / ("runnel-keras-" + std::to_string(::getpid())));
    });
    return d;
  }();
  return dir;
}

std::string file(const std::string& name) { return (models() / name).string(); }

} // namespace

TEST_CASE("Keras 2 and 3 models, Sequential and functional, compute NumPy's outputs", "[keras]") {
  struct expect {
    const char* model;
    const char* input;
    const char* output;
    const char* version;
  };
  for (auto e : {expect{"mlp_k2", "dense_input", "dense_1", "2.11.0"},
                 expect{"cnn_k3", "input_layer", "activation", "3.3.3"},
                 expect{"rnn_k2", "embedding_input", "dense_2", "2.11.0"},
                 expect{"gru_k3", "inputs", "score", "3.3.3"}}) {
    INFO(e.model);
    auto m = import_keras_model(file(std::string(e.model) + ".h5"));
    REQUIRE(m);
    CHECK(m->keras_version == e.version);
    REQUIRE(m->inputs == std::vector<std::string>{e.input});
    REQUIRE(m->outputs == std::vector<std::string>{e.output});
    auto x = read_npy(file(std::string(e.model) + "_in.npy"));
    auto want = read_npy(file(std::string(e.model) + "_out.npy"));
    REQUIRE(x);
    REQUIRE(want);
    runtime rt;
    session s(rt, m->g);
    auto y = s.run({{e.input, *x}}, {e.output});
    REQUIRE(y);
    CHECK(all_close((*y)[0], *want, 1e-4, 1e-5));
    // Exported as a GraphDef and imported again, it computes the same.
    auto back = import_tf_graph_def(export_tf_graph_def(m->g), tf_graph_format::binary);
    REQUIRE(back);
    session s2(rt, *back);
    auto y2 = s2.run({{e.input, *x}}, {e.output});
    REQUIRE(y2);
    CHECK(equal((*y2)[0], (*y)[0]));
  }
}

TEST_CASE("unsupported Keras layers are all named in one error", "[keras]") {
  auto m = import_keras_model(file("unsupported.h5"));
  REQUIRE_FALSE(m);
  CHECK(m.error().code() == error_code::unimplemented);
  CHECK_THAT(m.error().to_string(), Catch::Contains("unsupported.h5") &&
                                        Catch::Contains("Lambda (layer 'lambda')") &&
                                        Catch::Contains("MultiHeadAttention (layer 'attention')"));
}

TEST_CASE("numbers in a model_config that are not sane integers are refused by name", "[keras]") {
  // Found by the keras_config fuzz target: nlohmann's conversion of a float beyond int64 is
  // undefined behaviour, so every integer goes through a checked reader.
  for (auto units : {"45555555555555555555555555555555", "1e300", "2.5", "-3", "\"four\""}) {
    INFO(units);
    std::string config =
        std::string(R"({"class_name": "Sequential", "config": {"name": "s", "layers": [)") +
        R"({"class_name": "InputLayer", "config": {"name": "x", "batch_input_shape": [null, 3]}},)" +
        R"({"class_name": "Dense", "config": {"name": "d", "units": )" + units + "}}]}}";
    keras_weights w{{"d", {{"kernel", tensor::from_values<float>({3, 2}, {1, 2, 3, 4, 5, 6})}}}};
    auto m = build_keras_model(config, w, "config.json");
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().to_string(), Catch::Contains("config.json") &&
                                          Catch::Contains("layer 'd' (Dense)") &&
                                          Catch::Contains("config 'units'"));
  }
}

TEST_CASE("bad Keras files give errors naming the file and layer", "[keras]") {
  auto dir = models();
  SECTION("weights only") {
    auto path = (dir / "weights_only.h5").string();
    REQUIRE(write_checkpoint(path, {{"dense/kernel", tensor::from_values<float>({1}, {1})}}, {})
                .ok());
    auto m = import_keras_model(path);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().to_string(), Catch::Contains("weights_only.h5 has no model_config"));
  }
  SECTION("not HDF5") {
    auto path = (dir / "notes.h5").string();
    std::ofstream(path) << "not an hdf5 file";
    auto m = import_keras_model(path);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().to_string(), Catch::Contains("notes.h5"));
  }
  SECTION("a layer whose weight is missing, and bad JSON") {
    std::string cmd =
        "/usr/bin/python3 -c \"import h5py, json\n"
        "with h5py.File('" + (dir / "missing.h5").string() + "', 'w') as f:\n"
        "  f.attrs['model_config'] = json.dumps({'class_name': 'Sequential', 'config': {'name': "
        "'s', 'layers': [{'class_name': 'Dense', 'config': {'name': 'd', 'units': 2, "
        "'batch_input_shape': [None, 3]}}]}})\n"
        "  f.create_group('model_weights/d/d')\n"
        "with h5py.File('" + (dir / "badjson.h5").string() + "', 'w') as f:\n"
        "  f.attrs['model_config'] = '{not json'\n\"";
    REQUIRE(std::system(cmd.c_str()) == 0);
    auto m = import_keras_model((dir / "missing.h5").string());
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().to_string(), Catch::Contains("missing.h5") &&
                                          Catch::Contains("layer 'd' (Dense)") &&
                                          Catch::Contains("weight 'kernel' is not in the file"));
    auto j = import_keras_model((dir / "badjson.h5").string());
    REQUIRE_FALSE(j);
    CHECK_THAT(j.error().to_string(), Catch::Contains("badjson.h5: model_config is not valid JSON"));
  }
}
