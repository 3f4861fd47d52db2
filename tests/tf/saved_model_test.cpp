// TensorFlow 1.x SavedModels: a directory written by tests/tf/make_tf_saved_model.py loaded as
// TensorFlow's loader does (the MetaGraph by tags, the variables through its SaverDef's own saver,
// the legacy init op, never the initializers), its signatures run and checked against NumPy, the
// ways it can be wrong named; and a Runnel graph exported as a SavedModel and loaded back.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runnel/actors/state/saved_model.hpp"
#include "runnel/ops/ops.hpp"
#include "runnel/storage/example.hpp"
#include "runnel/storage/npy.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

using namespace runnel;
namespace fs = std::filesystem;

namespace {

struct model_dir {
  fs::path path = fs::temp_directory_path() / ("runnel-tfsaved-" + std::to_string(::getpid()) +
                                               "-" + std::to_string(std::rand()));
  model_dir() {
    std::string cmd = "/usr/bin/python3 " RUNNEL_SOURCE_DIR "/tests/tf/make_tf_saved_model.py " +
                      path.string() + " " RUNNEL_SOURCE_DIR "/storage/tf";
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  ~model_dir() { fs::remove_all(path); }
  std::string model() const { return (path / "model").string(); }
  tensor npy(const std::string& file) const { return read_npy((path / file).string()).value(); }
  std::string text(const std::string& file) const {
    std::ifstream in(path / file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

void check_close(const tensor& got, const tensor& want) {
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < want.num_elements(); ++i)
    CHECK(got.data<float>()[i] == Approx(want.data<float>()[i]).margin(1e-5));
}

std::string error_of(const status& s) {
  return s.to_string();
}

} // namespace

TEST_CASE("a SavedModel loads by its tags and serves its signatures as TensorFlow's does",
          "[tf][saved_model]") {
  model_dir dir;
  auto info = read_tf_saved_model(dir.model(), {"serve"});
  INFO(info.error().to_string());
  REQUIRE(info.ok());
  CHECK(info->tag_sets == std::vector<std::vector<std::string>>{{"serve"}, {"train"}});
  CHECK(info->init_op == "legacy_init");
  CHECK(info->meta.checkpoint_keys ==
        std::map<std::string, std::string>{{"b", "dense/bias"}, {"w", "dense/kernel"}});
  CHECK(info->meta.signatures.at("from_hidden").inputs.at("h").name == "MatMul:0");

  runtime rt;
  auto m = saved_model::load(rt, dir.model());
  INFO(m.error().to_string());
  REQUIRE(m.ok());
  // w and b through the SaverDef's saver (keys dense/kernel, dense/bias: the second saver's keys
  // are not in the checkpoint), offset by the legacy init op (10, where its initializer says 0).
  auto y = (*m)->run("serving_default", {{"x", dir.npy("x.npy")}});
  INFO(y.error().to_string());
  REQUIRE(y.ok());
  check_close(y->at("y"), dir.npy("expected_y.npy"));
  // An input that is not a placeholder: feeding MatMul:0 overrides the product.
  auto h = (*m)->run("from_hidden", {{"h", dir.npy("h.npy")}}, {"y"});
  REQUIRE(h.ok());
  check_close(h->at("y"), dir.npy("expected_from_h.npy"));
  // Serialized tf.Examples through TensorFlow's ParseExample (imported as Runnel's): the rows of
  // x as feature "x", and variable-length features "tags" (int64) and "words" (bytes): three
  // features whose outputs TensorFlow orders otherwise than Runnel's ParseExample.
  auto xs = dir.npy("x.npy");
  std::vector<std::string> examples;
  for (int64_t r = 0; r < xs.dim(0); ++r) {
    feature x{feature_kind::floats, {}, {}, {}}, tags{feature_kind::int64s, {}, {}, {}},
        words{feature_kind::bytes, {"a", "b"}, {}, {}};
    for (int c = 0; c < 3; ++c)
      x.floats.push_back(xs.data<float>()[r * 3 + c]);
    for (int64_t t = 0; t < r; ++t)
      tags.int64s.push_back(100 * r + t);
    examples.push_back(encode_example({{"x", x}, {"tags", tags}, {"words", words}}));
  }
  auto classified = (*m)->run("classify", {{"examples", tensor::vector<std::string>(examples)}});
  INFO(classified.error().to_string());
  REQUIRE(classified.ok());
  check_close(classified->at("y"), dir.npy("expected_y.npy"));
  auto tags = classified->at("tags");
  REQUIRE(tags.num_elements() == 6); // 0 + 1 + 2 + 3 tags
  CHECK(tags.data<int64_t>()[0] == 100);
  CHECK(tags.data<int64_t>()[5] == 302);
  auto word_shape = classified->at("word_shape"); // 4 examples, at most 2 words each
  REQUIRE(word_shape.num_elements() == 2);
  CHECK(word_shape.data<int64_t>()[0] == 4);
  CHECK(word_shape.data<int64_t>()[1] == 2);
  // The session runs tensors by name too.
  auto direct = (*m)->session().run(named_feed_list{{"x", dir.npy("x.npy")}}, {"y"});
  REQUIRE(direct.ok());
  check_close(direct->at(0), dir.npy("expected_y.npy"));

  // The text form alone loads the same.
  fs::remove(dir.path / "model" / "saved_model.pb");
  REQUIRE(is_tf_saved_model(dir.model()));
  auto text = saved_model::load(rt, dir.model(), {"train"});
  INFO(text.error().to_string());
  REQUIRE(text.ok());
  CHECK((*text)->signatures().empty());
}

TEST_CASE("a SavedModel's wrong tags, keys, inputs and files are named with what exists",
          "[tf][saved_model]") {
  model_dir dir;
  runtime rt;
  auto tags = saved_model::load(rt, dir.model(), {"serve", "gpu"});
  REQUIRE_FALSE(tags.ok());
  CHECK(tags.error().code() == error_code::not_found);
  CHECK_THAT(error_of(tags.error()),
             Catch::Contains("no MetaGraph has the tags {serve, gpu}; its tag sets are:\n  serve\n"
                             "  train"));
  auto m = saved_model::load(rt, dir.model()).value();
  auto x = dir.npy("x.npy");
  auto key = m->run("predict", {{"x", x}});
  CHECK_THAT(error_of(key.error()),
             Catch::Contains("no signature 'predict' in " + dir.model() +
                             "; its signatures: classify, from_hidden, serving_default"));
  auto input = m->run("serving_default", {{"images", x}});
  CHECK_THAT(error_of(input.error()),
             Catch::Contains("signature 'serving_default' has no input 'images'; its inputs: x"));
  auto output = m->run("serving_default", {{"x", x}}, {"probabilities"});
  CHECK_THAT(error_of(output.error()),
             Catch::Contains("no output 'probabilities'; its outputs: y"));
  auto type = m->run("serving_default", {{"x", tensor::vector<int32_t>({1, 2, 3})}});
  CHECK_THAT(error_of(type.error()),
             Catch::Contains("input 'x': the signature takes float32, got int32"));
  auto dims = m->run("serving_default", {{"x", dir.npy("h.npy")}});
  CHECK_THAT(error_of(dims.error()),
             Catch::Contains("input 'x': the signature takes shape [?,3], got [2,2]"));
  // A missing input the graph needs fails in the step, naming the placeholder.
  CHECK_FALSE(m->run("serving_default", {}).ok());

  // Damaged or missing files.
  std::string pb = dir.text("model/saved_model.pb");
  auto cut = parse_tf_saved_model(std::string_view(pb).substr(0, pb.size() / 2), "cut.pb",
                                  dir.model(), {"serve"});
  REQUIRE_FALSE(cut.ok());
  CHECK_THAT(error_of(cut.error()), Catch::Contains("cut.pb: not a valid SavedModel"));
  auto no_vars = parse_tf_saved_model(pb, "saved_model.pb", "", {"serve"});
  REQUIRE_FALSE(no_vars.ok());
  CHECK_THAT(error_of(no_vars.error()),
             Catch::Contains("the graph has 3 variables (w, ...) but variables/variables.index "
                             "does not exist"));
  std::string txt = dir.text("model/saved_model.pbtxt");
  std::string bad_init = txt;
  for (size_t at; (at = bad_init.find("value: \"legacy_init\"")) != std::string::npos;)
    bad_init.replace(at, 20, "value: \"init_all_tables\"");
  auto init = parse_tf_saved_model(bad_init, "saved_model.pbtxt", dir.model(), {"serve"});
  REQUIRE_FALSE(init.ok());
  CHECK_THAT(error_of(init.error()),
             Catch::Contains("the init op 'init_all_tables' is not in the graph"));
  // A saver restoring a partitioned variable's slices: the MetaGraph imports and names them; the
  // loader refuses to restore them.
  std::string sliced = txt;
  auto slices_at = sliced.find("string_val: \"\"", sliced.find("save/RestoreV2/shape_and_slices"));
  sliced.replace(slices_at, 14, "string_val: \"2 0,2\"");
  auto sliced_model = parse_tf_saved_model(sliced, "saved_model.pbtxt", dir.model(), {"serve"});
  INFO(sliced_model.error().to_string());
  REQUIRE(sliced_model.ok());
  CHECK(sliced_model->meta.sliced_variables ==
        std::vector<std::string>{"b as a slice of 'dense/bias' (2 0,2)"});
  CHECK(sliced_model->meta.checkpoint_keys.count("w"));
  CHECK_THAT(error_of(read_tf_saved_model((dir.path / "nowhere").string()).error()),
             Catch::Contains("not a directory"));
  CHECK_THAT(error_of(read_tf_saved_model(dir.path.string()).error()),
             Catch::Contains("holds neither saved_model.pb nor saved_model.pbtxt"));
  // A checkpoint without a key the SaverDef's saver reads: the restore names variable and key.
  fs::remove(dir.path / "model" / "saved_model.pb");
  std::string renamed = txt;
  renamed.replace(renamed.find("\"dense/kernel\"", renamed.find("save/RestoreV2/tensor_names")), 14,
                  "\"dense/weights\"");
  std::ofstream(dir.path / "model" / "saved_model.pbtxt") << renamed;
  auto key_missing = saved_model::load(rt, dir.model());
  REQUIRE_FALSE(key_missing.ok());
  CHECK_THAT(error_of(key_missing.error()),
             Catch::Contains("restoring the variables: restore (variables read under other "
                             "names: w as 'dense/weights', b as 'dense/bias')"));
  CHECK_THAT(error_of(key_missing.error()),
             Catch::Contains("tensor 'dense/weights' is not in TensorFlow checkpoint"));
  fs::path index = dir.path / "model" / "variables" / "variables.index";
  fs::remove(index);
  auto restore = saved_model::load(rt, dir.model());
  REQUIRE_FALSE(restore.ok());
  CHECK_THAT(error_of(restore.error()),
             Catch::Contains("variables/variables.index does not exist"));
}

TEST_CASE("a Runnel graph exports as a SavedModel that loads and serves the same",
          "[tf][saved_model]") {
  fs::path dir = fs::temp_directory_path() / ("runnel-export-" + std::to_string(::getpid()) + "-" +
                                              std::to_string(std::rand()));
  runtime rt;
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, 2}, "x");
  auto w = variable(g, constant(g, tensor::from_values<float>({2, 2}, {1, 2, 3, 4})), "w");
  auto b = variable(g, constant(g, tensor::vector<float>({0.5f, -0.5f})), "b");
  auto y = matmul(x, w.value) + b.value;
  session s(rt, g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto swap = assign(w, constant(g, tensor::from_values<float>({2, 2}, {0, 1, 1, 0})));
  REQUIRE(s.run({}, {swap}).ok());
  saved_model_signature sig;
  sig.inputs["x"] = "x";
  sig.outputs["y"] = y.name();
  auto saved = save_saved_model(s, g, dir.string(), {{"serving_default", sig}});
  INFO(saved.to_string());
  REQUIRE(saved.ok());
  CHECK(fs::exists(dir / "variables" / "variables.index"));
  CHECK(save_saved_model(s, g, dir.string(), {}).code() == error_code::already_exists);

  auto m = saved_model::load(rt, dir.string());
  INFO(m.error().to_string());
  REQUIRE(m.ok());
  auto in = tensor::from_values<float>({1, 2}, {3, 7});
  auto out = (*m)->run("serving_default", {{"x", in}});
  INFO(out.error().to_string());
  REQUIRE(out.ok());
  // The assigned w (a swap), not the initializer's: [7 + 0.5, 3 - 0.5].
  check_close(out->at("y"), tensor::from_values<float>({1, 2}, {7.5f, 2.5f}));
  auto& info = (*m)->signatures().at("serving_default").inputs.at("x");
  CHECK(info.name == "x:0"); // the form TensorFlow's get_tensor_by_name needs
  CHECK(info.type == dtype::f32);
  CHECK(info.dims.to_string() == "[?,2]");
  fs::remove_all(dir);
}

TEST_CASE("TensorFlow's ParseExample imports with its defaults, keys and output order",
          "[tf][saved_model]") {
  // tf.parse_example(s, {"a": FixedLenFeature([2], tf.float32),
  //                      "n": FixedLenFeature([], tf.int64, default_value=7)}): dense only, "a"
  // required (an empty default), "n" defaulted.
  const char* text = R"(
node { name: "s" op: "Placeholder" attr { key: "dtype" value { type: DT_STRING } }
       attr { key: "shape" value { shape { dim { size: -1 } } } } }
node { name: "P/names" op: "Const" attr { key: "dtype" value { type: DT_STRING } }
       attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { dim { size: 0 } } } } } }
node { name: "P/key_a" op: "Const" attr { key: "dtype" value { type: DT_STRING } }
       attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { } string_val: "a" } } } }
node { name: "P/key_n" op: "Const" attr { key: "dtype" value { type: DT_STRING } }
       attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { } string_val: "n" } } } }
node { name: "P/Const" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 0 } } } } } }
node { name: "P/Const_1" op: "Const" attr { key: "dtype" value { type: DT_INT64 } }
       attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { } int64_val: 7 } } } }
node { name: "P/ParseExample" op: "ParseExample"
       input: "s" input: "P/names" input: "P/key_a" input: "P/key_n" input: "P/Const"
       input: "P/Const_1"
       attr { key: "Nsparse" value { i: 0 } } attr { key: "Ndense" value { i: 2 } }
       attr { key: "sparse_types" value { list { } } }
       attr { key: "Tdense" value { list { type: DT_FLOAT type: DT_INT64 } } }
       attr { key: "dense_shapes" value { list { shape { dim { size: 2 } } shape { } } } } }
versions { producer: 134 }
)";
  auto g = import_tf_graph_def(text, tf_graph_format::text, "parse.pbtxt");
  INFO(g.error().to_string());
  REQUIRE(g.ok());
  CHECK_FALSE(g->find("P/ParseExample/runnel_parse")); // one node: the orders agree
  feature a{feature_kind::floats, {}, {1.5f, -2}, {}}, n{feature_kind::int64s, {}, {}, {3}};
  std::vector<std::string> rows{encode_example({{"a", a}, {"n", n}}), encode_example({{"a", a}})};
  runtime rt;
  session s(rt, *g);
  auto out = s.run(named_feed_list{{"s", tensor::vector<std::string>(rows)}},
                   {"P/ParseExample:0", "P/ParseExample:1"});
  INFO(out.error().to_string());
  REQUIRE(out.ok());
  CHECK(out->at(0).shape().to_string() == "[2,2]");
  CHECK(out->at(0).data<float>()[3] == -2.0f);
  CHECK(out->at(1).data<int64_t>()[0] == 3);
  CHECK(out->at(1).data<int64_t>()[1] == 7); // the default
  // A required feature missing fails the step, naming it.
  auto missing = s.run(named_feed_list{{"s", tensor::vector<std::string>({encode_example({})})}},
                       {"P/ParseExample:0"});
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().to_string(), Catch::Contains("'a'"));
  // A key that is not a constant is named.
  std::string fed_key = text;
  fed_key.replace(fed_key.find("name: \"P/key_a\" op: \"Const\""), 28,
                  "name: \"P/key_a\" op: \"Placeholder\"");
  auto bad = import_tf_graph_def(fed_key, tf_graph_format::text, "parse.pbtxt");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().to_string(),
             Catch::Contains("node 'P/ParseExample' (op ParseExample): key input 'P/key_a' is not "
                             "a constant"));
}
