// TensorFlow 1.x MetaGraphDefs: a training directory written by tests/tf/make_tf_meta_graph.py
// (the .meta encoded by protoc from TensorFlow's text layout, the checkpoint by
// make_tf_checkpoint.py's encoders) imported, its savers left out, its variables restored by
// name from the checkpoint beside it, and the model's output compared with NumPy's.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runnel/actors/exec/session.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/storage/npy.hpp"
#include "runnel/storage/tf/meta_graph.hpp"

using namespace runnel;
namespace fs = std::filesystem;

namespace {

struct meta_dir {
  fs::path path = fs::temp_directory_path() / ("runnel-tfmeta-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(std::rand()));
  meta_dir() {
    std::string cmd = "/usr/bin/python3 " RUNNEL_SOURCE_DIR "/tests/tf/make_tf_meta_graph.py " +
                      path.string() + " " RUNNEL_SOURCE_DIR "/storage/tf";
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  ~meta_dir() { fs::remove_all(path); }
  std::string text(const std::string& file) const {
    std::ifstream in(path / file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

} // namespace

TEST_CASE("a .meta file imports, and the checkpoint beside it restores into its variables",
          "[tf][meta_graph]") {
  meta_dir dir;
  auto mg = import_tf_meta_graph((dir.path / "model.ckpt-5.meta").string());
  INFO(mg.error().to_string());
  REQUIRE(mg.ok());
  CHECK(mg->variables == std::vector<std::string>{"w", "b"});
  CHECK(mg->left_out == std::vector<std::string>{"save", "save_1"});
  CHECK(mg->restore_op == "save/restore_all");
  CHECK(mg->tensorflow_version == "1.15.0");
  CHECK(mg->collections.at("train_op") == "1 node");
  CHECK(mg->collections.at("variables") == "2 serialized entries");
  CHECK(mg->graph.collection("trainable_variables").size() == 2);
  CHECK_FALSE(mg->graph.find("save/RestoreV2"));
  // TensorFlow's resume pattern: the graph, then its variables from the checkpoint.
  runtime rt;
  session s(rt, mg->graph);
  saver sv(mg->graph);
  auto latest = saver::latest_checkpoint(dir.path.string());
  REQUIRE(latest.ok());
  REQUIRE(sv.restore(s, *latest).ok());
  auto x = read_npy((dir.path / "x.npy").string()).value();
  auto expected = read_npy((dir.path / "expected_y.npy").string()).value();
  auto y = s.run(named_feed_list{{"x", x}}, {"y"});
  INFO(y.error().to_string());
  REQUIRE(y.ok());
  REQUIRE(y->at(0).shape() == expected.shape());
  for (int64_t i = 0; i < expected.num_elements(); ++i)
    CHECK(y->at(0).data<float>()[i] == Approx(expected.data<float>()[i]).margin(1e-6));
  // The initializer the graph carries still runs: zeros again.
  REQUIRE(s.run(named_feed_list{}, {}, {"init"}).ok());
  CHECK(s.run(named_feed_list{{"x", x}}, {"y"}).value().at(0).data<float>()[0] == 0.0f);
  // The text form imports the same.
  auto text = import_tf_meta_graph((dir.path / "model.ckpt-5.meta.pbtxt").string());
  REQUIRE(text.ok());
  CHECK(text->variables == mg->variables);
}

TEST_CASE("bad .meta files are named with what is wrong", "[tf][meta_graph]") {
  meta_dir dir;
  std::string text = dir.text("model.ckpt-5.meta.pbtxt");
  // A node that reads the saver's scope, which is left out.
  std::string reads_saver = text;
  reads_saver.insert(reads_saver.find("versions {"),
                     "node { name: \"peek\" op: \"Identity\" input: \"save/Const\" "
                     "attr { key: \"T\" value { type: DT_STRING } } }\n  ");
  auto r = import_tf_meta_graph_def(reads_saver, "peek.meta");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(
      r.error().to_string(),
      Catch::Contains("peek.meta: node 'peek' reads 'save/Const' of the saver scope 'save/'"));
  // Truncated binary.
  std::ifstream in(dir.path / "model.ckpt-5.meta", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto cut =
      import_tf_meta_graph_def(std::string_view(bytes).substr(0, bytes.size() / 2), "cut.meta");
  REQUIRE_FALSE(cut.ok());
  CHECK_THAT(cut.error().to_string(), Catch::Contains("cut.meta: not a valid MetaGraphDef"));
  CHECK_FALSE(import_tf_meta_graph((dir.path / "missing.meta").string()).ok());
}
