// TensorFlow GraphDef import and export, and NumPy files. The GraphDefs come from
// tests/tf/make_tf_graphs.py, which encodes them with its own protobuf writer (not Runnel's
// schema) as TensorFlow 1.x writes frozen graphs, and computes the expected outputs with NumPy.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runnel/actors/exec/session.hpp"
#include "runnel/net/graph_def.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/kernel/kernel.hpp"
#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/optimize/graph_optimizer.hpp"
#include "runnel/storage/npy.hpp"
#include "runnel/storage/tf/tf_graph.hpp"
#include "runnel/ops/cpu/builtin_kernels.hpp"

using namespace runnel;
namespace fs = std::filesystem;

namespace {

/// The generated files, made once per test process.
const fs::path& tf_files() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("runnel-tf-" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::string cmd = "/usr/bin/python3 " RUNNEL_SOURCE_DIR "/tests/tf/make_tf_graphs.py " +
                      d.string() + " 64 2>&1";
    int rc = std::system(cmd.c_str());
    if (rc != 0)
      FAIL("make_tf_graphs.py failed (status " << rc << ")");
    std::atexit([] { fs::remove_all(fs::temp_directory_path() /
                                    ("runnel-tf-" + std::to_string(::getpid()))); });
    return d;
  }();
  return dir;
}

std::string file(const std::string& name) { return (tf_files() / name).string(); }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

} // namespace

TEST_CASE("an imported TensorFlow CNN gives the same outputs with the graph optimizer on and off",
          "[tf][optimizer]") {
  auto images = read_npy(file("images.npy"));
  REQUIRE(images);
  auto g = import_tf_graph(file("mnist_cnn.pb"));
  REQUIRE(g);
  runtime rt;
  session off(rt, *g, {.allow_soft_placement = true,
                       .optimizer = graph_optimizer_options::none()});
  session on(rt, *g, {.allow_soft_placement = true});
  auto a = off.run({{"x", *images}}, {"softmax", "prediction"});
  auto b = on.run({{"x", *images}}, {"softmax", "prediction"});
  REQUIRE(a);
  REQUIRE(b);
  CHECK(all_close((*b)[0], (*a)[0], 1e-5, 1e-6));
  CHECK(equal((*b)[1], (*a)[1]));
  // What the passes made of it: the convolutions and products with their biases and ReLUs fused.
  std::vector<char> needed(size_t(g->num_nodes()), 1);
  auto og = optimize_graph(*g, needed,
                           {.feeds = {*g->find_endpoint("x")},
                            .fetches = {*g->find_endpoint("softmax"),
                                        *g->find_endpoint("prediction")},
                            .targets = {}},
                           {},
                           {.kernels = &builtin_kernels(),
                            .device_of_node = std::vector<std::string>( // as soft placement put it
                                size_t(g->num_nodes()), "/job:localhost/replica:0/task:0/device:CPU:0")});
  REQUIRE(og);
  int fused = 0;
  for (auto& n : og->g->nodes())
    fused += n.op == "_FusedConv2D" || n.op == "_FusedMatMul";
  CHECK(fused == 4);
  CHECK(og->g->num_nodes() < g->num_nodes());
}

TEST_CASE("a frozen TensorFlow CNN imports from .pb and .pbtxt and computes NumPy's answer",
          "[tf]") {
  auto images = read_npy(file("images.npy"));
  REQUIRE(images);
  auto want_softmax = read_npy(file("expected_softmax.npy"));
  auto want_prediction = read_npy(file("expected_prediction.npy"));
  REQUIRE(want_softmax);
  REQUIRE(want_prediction);
  for (auto name : {"mnist_cnn.pb", "mnist_cnn.pbtxt"}) {
    INFO(name);
    auto g = import_tf_graph(file(name));
    REQUIRE(g);
    CHECK(g->num_nodes() == 29);
    // AddV2 is Runnel's Add; the GPU the file asks for is a request, kept for placement.
    CHECK(g->at(*g->find("fc1/add")).op == "Add");
    CHECK(g->at(*g->find("conv1/Conv2D")).device == "/device:GPU:0");
    CHECK(g->at(*g->find("x")).output_shapes[0] == shape({-1, 784}));
    runtime rt;
    session s(rt, *g, {.allow_soft_placement = true});
    auto out = s.run({{"x", *images}}, {"softmax", "prediction"});
    REQUIRE(out);
    CHECK(all_close((*out)[0], *want_softmax, 1e-4, 1e-6));
    CHECK(equal((*out)[1], *want_prediction));
  }
}

TEST_CASE("binary and text GraphDefs of one graph import to the same graph", "[tf]") {
  auto a = import_tf_graph(file("mnist_cnn.pb"));
  auto b = import_tf_graph(file("mnist_cnn.pbtxt"));
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->to_text() == b->to_text());
  // Detection without the extension: the text file under another name still reads.
  auto text = read_all(file("mnist_cnn.pbtxt"));
  auto c = import_tf_graph_def(text, tf_graph_format::detect, "renamed");
  REQUIRE(c);
  CHECK(c->to_text() == a->to_text());
}

TEST_CASE("a legacy GraphDef's empty placeholder shape means unknown", "[tf]") {
  auto g = import_tf_graph(file("legacy_mlp.pbtxt"));
  REQUIRE(g);
  CHECK_FALSE(g->at(*g->find("x")).output_shapes[0].has_known_rank());
  auto x = read_npy(file("mlp_in.npy"));
  auto want = read_npy(file("expected_mlp.npy"));
  REQUIRE(x);
  REQUIRE(want);
  runtime rt;
  session s(rt, *g);
  auto out = s.run({{"x", *x}}, {"y"});
  REQUIRE(out);
  CHECK(all_close((*out)[0], *want, 1e-5, 1e-6));
  // With versions (producer 27), the same empty shape is a scalar.
  auto versioned = read_all(file("legacy_mlp.pbtxt")) + "versions {\n  producer: 27\n}\n";
  auto v = import_tf_graph_def(versioned, tf_graph_format::text, "versioned");
  // A scalar x cannot be multiplied by a matrix: the error names the node.
  REQUIRE_FALSE(v);
  CHECK_THAT(v.error().message(), Catch::Contains("xw"));
}

TEST_CASE("unsupported ops are all named with their nodes in one error", "[tf]") {
  auto g = import_tf_graph(file("unsupported.pbtxt"));
  REQUIRE_FALSE(g);
  CHECK(g.error().code() == error_code::unimplemented);
  auto m = g.error().to_string();
  CHECK_THAT(m, Catch::Contains("unsupported.pbtxt"));
  CHECK_THAT(m, Catch::Contains("node 'lrn' (op LRN)"));
  CHECK_THAT(m, Catch::Contains("node 'z' (op FancyUnknownOp)"));
}

TEST_CASE("TensorFlow 1.x's v1 Gather imports as GatherV2 along axis 0", "[tf]") {
  // As TF 1.x-era graphs write it (tf.gather before 1.4, embedding lookups): params, indices
  // and a control input, validate_indices set; a node already named "g/axis" is left alone.
  std::string text = R"(
node { name: "params" op: "Const"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT
    tensor_shape { dim { size: 3 } dim { size: 2 } }
    float_val: 1 float_val: 2 float_val: 3 float_val: 4 float_val: 5 float_val: 6 } } } }
node { name: "idx" op: "Placeholder" attr { key: "dtype" value { type: DT_INT64 } } }
node { name: "g/axis" op: "Const"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 7 } } } }
node { name: "g" op: "Gather" input: "params" input: "idx" input: "^g/axis"
  attr { key: "Tparams" value { type: DT_FLOAT } }
  attr { key: "Tindices" value { type: DT_INT64 } }
  attr { key: "validate_indices" value { b: true } } }
)";
  auto g = import_tf_graph_def(text, tf_graph_format::text, "gather_v1.pbtxt");
  REQUIRE(g);
  auto& gather = g->at(*g->find("g"));
  CHECK(gather.op == "GatherV2");
  CHECK(g->find("g/axis_1"));
  runtime rt;
  session s(rt, *g);
  auto out = s.run({{"idx", tensor::vector<int64_t>({2, 0, 2})}}, {"g"});
  REQUIRE(out);
  tensor want(dtype::f32, shape{3, 2});
  float rows[] = {5, 6, 1, 2, 5, 6};
  std::copy(rows, rows + 6, want.data<float>());
  CHECK(all_close((*out)[0], want, 0, 0));
  // An index outside params is an error naming the node, as for GatherV2.
  auto bad = s.run({{"idx", tensor::vector<int64_t>({3})}}, {"g"});
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().to_string(), Catch::Contains("'g'") && Catch::Contains("indices[0] = 3"));
}

TEST_CASE("damaged GraphDefs give errors naming the file", "[tf]") {
  std::string pb = read_all(file("mnist_cnn.pb"));
  auto dir = tf_files();
  SECTION("truncated binary") {
    write_all((dir / "cut.pb").string(), pb.substr(0, pb.size() / 2));
    auto g = import_tf_graph((dir / "cut.pb").string());
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().to_string(), Catch::Contains("cut.pb") &&
                                          Catch::Contains("not a valid binary GraphDef"));
  }
  SECTION("bad text, with its line and column") {
    write_all((dir / "bad.pbtxt").string(), "node {\n  name: \"x\"\n  op: Placeholder\n}\n");
    auto g = import_tf_graph((dir / "bad.pbtxt").string());
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().to_string(), Catch::Contains("bad.pbtxt") && Catch::Contains("line 3"));
  }
  SECTION("an input naming a missing node") {
    auto g = import_tf_graph_def("node { name: \"y\" op: \"Relu\" input: \"nowhere\" "
                                 "attr { key: \"T\" value { type: DT_FLOAT } } }",
                                 tf_graph_format::text, "dangling.pbtxt");
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().to_string(), Catch::Contains("dangling.pbtxt") &&
                                          Catch::Contains("'nowhere'"));
  }
  SECTION("an attribute Runnel does not know") {
    auto g = import_tf_graph_def(
        "node { name: \"x\" op: \"Placeholder\" attr { key: \"dtype\" value { type: DT_FLOAT } } "
        "attr { key: \"fancy\" value { i: 3 } } }",
        tf_graph_format::text, "attr.pbtxt");
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().to_string(), Catch::Contains("attribute 'fancy'") &&
                                          Catch::Contains("node 'x'"));
  }
  SECTION("a tensor whose content does not match its shape") {
    auto g = import_tf_graph_def(
        "node { name: \"c\" op: \"Const\" attr { key: \"dtype\" value { type: DT_FLOAT } } "
        "attr { key: \"value\" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 4 } } "
        "tensor_content: \"\\000\\000\\200?\" } } } }",
        tf_graph_format::text, "short.pbtxt");
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().to_string(), Catch::Contains("tensor_content has 4 bytes"));
  }
  SECTION("a Runnel graph file is told apart") {
    graph h;
    placeholder(h, dtype::f32, {2}, "x");
    REQUIRE(save_graph(h, (dir / "mine.graph").string()).ok());
    auto g = import_tf_graph((dir / "mine.graph").string());
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().to_string(), Catch::Contains("is a Runnel graph file"));
  }
}

TEST_CASE("typed tensor values fill their shape and a huge fill is refused", "[tf]") {
  auto g = import_tf_graph_def(
      "node { name: \"c\" op: \"Const\" attr { key: \"dtype\" value { type: DT_INT32 } } "
      "attr { key: \"value\" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } dim "
      "{ size: 3 } } int_val: 1 int_val: 2 } } } }",
      tf_graph_format::text);
  REQUIRE(g);
  auto& v = std::get<tensor>(g->at(0).attrs.at("value"));
  CHECK(equal(v, tensor::from_values<int32_t>({2, 3}, {1, 2, 2, 2, 2, 2})));
  auto huge = import_tf_graph_def(
      "node { name: \"c\" op: \"Const\" attr { key: \"dtype\" value { type: DT_FLOAT } } "
      "attr { key: \"value\" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: "
      "1000000 } dim { size: 1000000 } } float_val: 1 } } } }",
      tf_graph_format::text);
  REQUIRE_FALSE(huge);
  CHECK_THAT(huge.error().message(), Catch::Contains("larger than 1 GiB"));
}

TEST_CASE("exported GraphDefs import back to the same graph, binary and text", "[tf]") {
  graph g;
  auto x = placeholder(g, dtype::f32, {-1, 3}, "x");
  auto w = constant(g, tensor::from_values<float>({3, 2}, {1, 2, 3, 4, 5, 6}), "w");
  auto names = constant(g, tensor::vector<std::string>({"a", "b\n\0c"}), "names");
  auto y = softmax(matmul(x, w), "y");
  (void)names;
  (void)y;
  for (auto format : {tf_graph_format::binary, tf_graph_format::text}) {
    auto bytes = export_tf_graph_def(g, format);
    auto back = import_tf_graph_def(bytes, format, "exported");
    REQUIRE(back);
    CHECK(back->to_text() == g.to_text());
  }
  auto path = (tf_files() / "exported.pbtxt").string();
  REQUIRE(save_tf_graph(g, path).ok());
  CHECK_THAT(read_all(path), Catch::Contains("op: \"MatMul\""));
}

TEST_CASE("graphs with conds and while loops export as GraphDefs and run after import", "[tf]") {
  // TensorFlow's v1 control flow is the same primitives (Switch, Merge, Enter, Exit,
  // NextIteration, LoopCond) in a GraphDef: a loop's back edge (NextIteration -> Merge) must
  // survive the trip.
  graph g;
  auto n = placeholder(g, dtype::i32, shape{}, "n");
  auto zero = constant(g, 0, "zero");
  auto one = constant(g, 1, "one");
  auto out = while_loop([&](const std::vector<output>& v) { return less(v[0], n); },
                        [&](const std::vector<output>& v) {
                          return std::vector<output>{add(v[0], one), add(v[1], v[0])};
                        },
                        {zero, zero});
  auto total = identity(out[1], "total");
  auto signed_total = identity(cond(
                                   greater(total, constant(g, 10)), [&] { return neg(total); },
                                   [&] { return mul(total, constant(g, 2)); }),
                               "signed_total");
  (void)signed_total;
  for (auto format : {tf_graph_format::binary, tf_graph_format::text}) {
    auto back = import_tf_graph_def(export_tf_graph_def(g, format), format, "loop");
    REQUIRE(back);
    runtime rt;
    session s(rt, *back);
    auto small = s.run({{"n", tensor::scalar<int32_t>(4)}}, {"total", "signed_total"});
    REQUIRE(small);
    CHECK(*(*small)[0].data<int32_t>() == 6); // 0 + 1 + 2 + 3
    CHECK(*(*small)[1].data<int32_t>() == 12);
    auto big = s.run({{"n", tensor::scalar<int32_t>(10)}}, {"signed_total"});
    REQUIRE(big);
    CHECK(*(*big)[0].data<int32_t>() == -45);
  }
}

TEST_CASE("NumPy files round-trip and foreign layouts read", "[tf][npy]") {
  auto t = tensor::from_values<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto bytes = serialize_npy(t);
  REQUIRE(bytes);
  CHECK((bytes->size() - t.bytes()) % 64 == 0);
  auto back = parse_npy(*bytes);
  REQUIRE(back);
  CHECK(equal(*back, t));
  auto dir = tf_files();
  // NumPy itself writes Fortran order, big-endian and bool arrays; Runnel reads them in C order.
  std::string cmd = "/usr/bin/python3 -c \"import numpy as np; a = np.arange(6, dtype='>i4')"
                    ".reshape(2, 3); np.save('" + (dir / "f.npy").string() +
                    "', np.asfortranarray(a)); np.save('" + (dir / "b.npy").string() +
                    "', np.array([True, False, True]))\"";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto f = read_npy((dir / "f.npy").string());
  REQUIRE(f);
  CHECK(equal(*f, tensor::from_values<int32_t>({2, 3}, {0, 1, 2, 3, 4, 5})));
  auto b = read_npy((dir / "b.npy").string());
  REQUIRE(b);
  CHECK(equal(*b, tensor::vector<bool>({true, false, true})));
  // Runnel's files are read by NumPy.
  REQUIRE(write_npy((dir / "mine.npy").string(), t).ok());
  std::string check = "/usr/bin/python3 -c \"import numpy as np; a = np.load('" +
                      (dir / "mine.npy").string() +
                      "'); assert a.dtype == np.float32 and a.shape == (2, 3) and a[1, 2] == 6\"";
  CHECK(std::system(check.c_str()) == 0);
  SECTION("damage is reported with the file and offset") {
    auto cut = parse_npy(bytes->substr(0, bytes->size() - 4), "cut.npy");
    REQUIRE_FALSE(cut);
    CHECK_THAT(cut.error().to_string(), Catch::Contains("cut.npy") && Catch::Contains("offset"));
    auto junk = parse_npy("hello world, not numpy", "junk.npy");
    REQUIRE_FALSE(junk);
    CHECK_THAT(junk.error().to_string(), Catch::Contains("not a NumPy .npy file"));
    auto strings = serialize_npy(tensor::vector<std::string>({"a"}));
    REQUIRE_FALSE(strings);
  }
}
