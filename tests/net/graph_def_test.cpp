#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "runnel/net/graph_def.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

graph model() {
  graph g;
  g.set_seed(3);
  auto x = placeholder(g, dtype::f32, shape{-1, 3}, "x");
  auto w = variable(g, constant(g, vals<float>({3, 2}, {1, 2, 3, 4, 5, 6})), "w");
  auto b = variable(g, zeros(g, dtype::f32, {2}), "b");
  auto noise = random_uniform(g, {2}, dtype::f32, 5);
  {
    auto d = g.device("/cpu:0");
    auto logits = bias_add(matmul(x, w), b, "logits");
    auto probs = softmax(logits, "probs");
    concat({probs, probs}, 1, "both");
  }
  auto names = constant(g, tensor::vector<std::string>({"cat", "dog"}), "names");
  auto picked = gather(names, argmax(output(&g, {g.find("probs").value(), 0}), 1));
  (void)noise;
  (void)picked;
  global_variables_initializer(g);
  return g;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".graph"))
      .string();
}

} // namespace

TEST_CASE("a graph survives a save/load round trip and runs the same", "[net]") {
  graph g = model();
  auto path = temp_path("roundtrip");
  REQUIRE(save_graph(g, path).ok());
  auto loaded = load_graph(path);
  INFO(loaded.error().to_string());
  REQUIRE(loaded.ok());
  graph& h = loaded.value();
  CHECK(h.to_text() == g.to_text());
  CHECK(h.num_nodes() == g.num_nodes());
  CHECK(h.seed() == g.seed());
  CHECK(h.collection("variables").size() == 2);
  CHECK(serialize_graph(h) == serialize_graph(g));

  auto x = vals<float>({2, 3}, {1, 0, 0, 0, 1, 1});
  runtime rt;
  session s1(rt, g);
  REQUIRE(s1.run(named_feed_list{}, {}, {"init"}).ok());
  auto a = s1.run(named_feed_list{{"x", x}}, {"both", "GatherV2"}).value();
  runtime rt2;
  session s2(rt2, h);
  REQUIRE(s2.run(named_feed_list{}, {}, {"init"}).ok());
  auto b = s2.run(named_feed_list{{"x", x}}, {"both", "GatherV2"}).value();
  check_equal(a[0], b[0]);
  check_equal(a[1], b[1]);
  check_equal(b[1], tensor::vector<std::string>({"dog", "dog"}));
  std::filesystem::remove(path);
}

TEST_CASE("every attribute kind round-trips", "[net]") {
  graph g;
  node_def d{
      "p", "Placeholder", {}, "/job:w/task:1", {{"dtype", dtype::i64}, {"shape", shape{-1, 4}}}};
  REQUIRE(g.add_node(d).ok());
  // Internal attributes ("_...") may hold any kind.
  node_def n{"n",
             "NoOp",
             {"^p"},
             "",
             {{"_ints", std::vector<int64_t>{1, -2}},
              {"_reals", std::vector<double>{0.5, -1e300}},
              {"_types", std::vector<dtype>{dtype::bf16, dtype::string}},
              {"_strings", std::vector<std::string>{"a", std::string("\0b", 2)}},
              {"_shapes", std::vector<shape>{shape::unknown(), shape{}}},
              {"_real", 2.5},
              {"_flag", true},
              {"_text", std::string("hi")}}};
  REQUIRE(g.add_node(n).ok());
  auto h = parse_graph(serialize_graph(g));
  REQUIRE(h.ok());
  CHECK(h->to_text() == g.to_text());
}

TEST_CASE("malformed graph files give clear errors", "[net]") {
  graph g = model();
  std::string good = serialize_graph(g);

  SECTION("not a graph file") {
    auto r = parse_graph("hello world, this is not a graph", builtin_ops(), "notes.txt");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == error_code::data_loss);
    CHECK(r.error().message().find("notes.txt: not a Runnel graph file") == 0);
  }
  SECTION("truncated at every length") {
    for (size_t len = 0; len < good.size(); len += 7) {
      auto r = parse_graph(good.substr(0, len));
      REQUIRE_FALSE(r.ok());
    }
  }
  SECTION("a future format version") {
    std::string bad = good;
    bad[8] = 9;
    auto r = parse_graph(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == error_code::unimplemented);
  }
  SECTION("flipped bits never crash") {
    std::mt19937 rng(1234);
    int failures = 0;
    for (int i = 0; i < 400; ++i) {
      std::string bad = good;
      for (int k = 0; k < 3; ++k) {
        size_t pos = 16 + rng() % (bad.size() - 16);
        bad[pos] = char(bad[pos] ^ (1 << (rng() % 8)));
      }
      auto r = parse_graph(bad);
      if (!r.ok())
        ++failures;
    }
    CHECK(failures > 0);
  }
}

TEST_CASE("loading names dangling inputs, cycles, unknown ops and bad attributes", "[net]") {
  graph g;
  auto a = constant(g, 1.f, "a");
  auto b = neg(a, "b");
  neg(b, "c");
  graph_def good = to_graph_def(g);
  auto load = [](const graph_def& d) {
    return parse_graph(serialize_graph_def(d), builtin_ops(), "m.graph");
  };
  REQUIRE(load(good).ok());

  SECTION("dangling input") {
    auto d = good;
    d.nodes[2].inputs = {"q"};
    auto r = load(d);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message() == "m.graph: node 'c' (op Neg): input 'q' refers to node 'q', which "
                                 "is not in the graph");
  }
  SECTION("dangling control input") {
    auto d = good;
    d.nodes[2].inputs.push_back("^ghost");
    CHECK(load(d).error().message().find("'ghost', which is not in the graph") !=
          std::string::npos);
  }
  SECTION("cycle") {
    auto d = good;
    d.nodes[1].inputs = {"c"};
    auto r = load(d);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message().find("the graph has a cycle") != std::string::npos);
  }
  SECTION("unknown op") {
    auto d = good;
    d.nodes[1].op = "Nag";
    CHECK(load(d).error().message() == "m.graph: node 'b' (op Nag): unknown op 'Nag'");
  }
  SECTION("bad attribute type") {
    auto d = good;
    d.nodes[0].attrs["dtype"] = std::string("float");
    auto r = load(d);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message().find("node 'a' (op Const): attribute 'dtype' must be type") !=
          std::string::npos);
  }
  SECTION("const value disagrees with its dtype") {
    auto d = good;
    d.nodes[0].attrs["dtype"] = dtype::i32;
    CHECK(load(d).error().message().find("value has dtype float32 but attribute dtype is int32") !=
          std::string::npos);
  }
  SECTION("duplicate node names") {
    auto d = good;
    d.nodes[2].name = "b";
    CHECK(load(d).error().message().find("two nodes are named 'b'") != std::string::npos);
  }
  SECTION("collection naming a missing node") {
    auto d = good;
    d.collections["variables"] = {"nobody"};
    CHECK(load(d).error().message().find("'nobody'") != std::string::npos);
  }
  SECTION("missing file") {
    auto r = load_graph("/nonexistent/model.graph");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == error_code::not_found);
    CHECK(r.error().message().find("/nonexistent/model.graph") != std::string::npos);
  }
}
