#include <catch2/catch.hpp>

#include "runnel/ops/graph/builder.hpp"

using namespace runnel;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const runnel::error& e) {
    return e.what();
  }
  return "no error";
}
} // namespace

TEST_CASE("builder names nodes uniquely and under name scopes", "[ops]") {
  graph g;
  auto a = constant(g, 1.f);
  auto b = constant(g, 2.f);
  auto c = a + b;
  auto d = a + b;
  CHECK(a.node().name == "Const");
  CHECK(b.node().name == "Const_1");
  CHECK(c.node().name == "Add");
  CHECK(d.node().name == "Add_1");
  {
    auto s = g.name_scope("layer1");
    auto e = add(c, d, "sum");
    CHECK(e.node().name == "layer1/sum");
    auto f = add(c, d, "sum");
    CHECK(f.node().name == "layer1/sum_1");
    auto inner = g.name_scope("inner");
    CHECK((c * d).node().name == "layer1/inner/Mul");
  }
  CHECK((c * d).node().name == "Mul");
  CHECK(c.name() == "Add");
}

TEST_CASE("builder records devices, colocation and control dependencies", "[ops]") {
  graph g;
  auto a = constant(g, 1.f);
  output b;
  {
    auto d = g.device("/job:ps/task:0/device:cpu:0");
    b = a * 2.0;
  }
  CHECK(b.node().device == "/job:ps/task:0/device:cpu:0");
  operation side = no_op(g, "side");
  output c;
  {
    auto deps = g.control_dependencies({side});
    auto col = g.colocate_with(b);
    c = -a;
  }
  CHECK(c.node().control_inputs == std::vector<int>{side.node_id()});
  CHECK(c.node().colocation == std::vector<std::string>{b.node().name});
  auto e = -a;
  CHECK(e.node().control_inputs.empty());
  CHECK(g.to_text().find("Neg = Neg(Const, ^side)") != std::string::npos);
}

TEST_CASE("operator overloads build the right ops and infer shapes", "[ops]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, 3}, "x");
  auto w = constant(g, {{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}});
  auto y = matmul(x, w);
  CHECK(y.shape() == shape({-1, 2}));
  CHECK(y.type() == dtype::f32);
  auto z = (y + 1.0) * y - y / 2.0;
  CHECK(z.shape() == shape({-1, 2}));
  CHECK((-z).node().op == "Neg");
  CHECK(w.shape() == shape({3, 2}));
  auto r = reshape(x, {-1});
  CHECK(r.shape() == shape({-1}));
  auto s = sum(w, {1}, true);
  CHECK(s.shape() == shape({3, 1}));
  auto t = transpose(w);
  CHECK(t.shape() == shape({2, 3}));
  auto cat = concat({w, w}, 0);
  CHECK(cat.shape() == shape({6, 2}));
  auto oh = one_hot(constant(g, {1, 2}), 4);
  CHECK(oh.shape() == shape({2, 4}));
  auto gth = gather(w, constant(g, {0, 2, 2}));
  CHECK(gth.shape() == shape({3, 2}));
  CHECK(argmax(w, 1).shape() == shape({3}));
  CHECK(shape_of(x).shape() == shape({2}));
}

TEST_CASE("shape and dtype errors are reported when the node is added, naming it", "[ops]") {
  graph g;
  auto a = constant(g, {{1.f, 2.f}, {3.f, 4.f}});
  auto b = constant(g, {{1.f, 2.f, 3.f}});
  auto msg = error_of([&] { matmul(a, b, {}, "logits"); });
  CHECK(msg.find("node 'logits' (op MatMul)") != std::string::npos);
  CHECK(msg.find("[2,2]") != std::string::npos);
  CHECK(msg.find("[1,3]") != std::string::npos);
  CHECK(g.find("logits") == std::nullopt); // nothing was added

  auto i = constant(g, {1, 2});
  msg = error_of([&] { add(a, i); });
  CHECK(msg.find("node 'Add' (op Add)") != std::string::npos);
  CHECK(msg.find("int32") != std::string::npos);

  msg = error_of([&] { add(a, constant(g, {1.f, 2.f, 3.f})); });
  CHECK(msg.find("incompatible shapes for broadcasting: [2,2] and [3]") != std::string::npos);

  msg = error_of([&] { reshape(a, {3, -1}); });
  CHECK(msg.find("cannot reshape") != std::string::npos);

  msg = error_of([&] { softmax(constant(g, {1, 2})); });
  CHECK(msg.find("does not support") != std::string::npos);

  msg = error_of([&] { sum(a, {2}); });
  CHECK(msg.find("out of range") != std::string::npos);
}

TEST_CASE("add_node validates ops, attributes and inputs", "[ops]") {
  graph g;
  CHECK(g.add_node(
             {"c", "Const", {}, "", {{"value", tensor::scalar<float>(1)}, {"dtype", dtype::f32}}})
            .ok());
  auto unknown = g.add_node({"u", "Frobnicate", {}, "", {}});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message() == "node 'u' (op Frobnicate): unknown op 'Frobnicate'");
  auto missing_attr = g.add_node({"p", "Placeholder", {}, "", {}});
  REQUIRE_FALSE(missing_attr.ok());
  CHECK(missing_attr.error().message().find("missing required attribute 'dtype'") !=
        std::string::npos);
  auto bad_attr = g.add_node({"p", "Placeholder", {}, "", {{"dtype", int64_t(3)}}});
  REQUIRE_FALSE(bad_attr.ok());
  CHECK(bad_attr.error().message().find("attribute 'dtype' must be type, got int") !=
        std::string::npos);
  auto extra = g.add_node({"p", "Placeholder", {}, "", {{"dtype", dtype::f32}, {"colour", true}}});
  REQUIRE_FALSE(extra.ok());
  CHECK(extra.error().message().find("unknown attribute 'colour'") != std::string::npos);
  auto dangling = g.add_node({"n", "Neg", {"nowhere:0"}, "", {}});
  REQUIRE_FALSE(dangling.ok());
  CHECK(dangling.error().message().find("no node named 'nowhere'") != std::string::npos);
  auto bad_index = g.add_node({"n", "Neg", {"c:3"}, "", {}});
  REQUIRE_FALSE(bad_index.ok());
  CHECK(bad_index.error().code() == error_code::invalid_argument);
  auto too_many = g.add_node({"n", "Neg", {"c", "c"}, "", {}});
  REQUIRE_FALSE(too_many.ok());
  auto dup = g.add_node({"c", "NoOp", {}, "", {}});
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.error().code() == error_code::already_exists);
  auto ref = g.add_node({"a", "Assign", {"c", "c"}, "", {}});
  REQUIRE_FALSE(ref.ok());
  CHECK(ref.error().message().find("must be a variable") != std::string::npos);
}

TEST_CASE("control edges that would close a cycle are rejected", "[ops]") {
  graph g;
  auto a = constant(g, 1.f);
  auto b = -a;
  auto c = -b;
  CHECK(g.add_control_edge(a.node_id(), c.node_id()).ok());
  auto cycle = g.add_control_edge(c.node_id(), a.node_id());
  REQUIRE_FALSE(cycle.ok());
  CHECK(cycle.message().find("cycle") != std::string::npos);
}

TEST_CASE("constants from nested C++ values", "[ops]") {
  graph g;
  auto m = constant(g, {{1.f, 2.f}, {3.f, 4.f}});
  auto& v = std::get<tensor>(m.node().attrs.at("value"));
  CHECK(v.to_string() == "float32[2,2] [[1, 2], [3, 4]]");
  CHECK(constant(g, 7).type() == dtype::i32);
  CHECK(constant(g, {1.0, 2.0}).type() == dtype::f64);
  CHECK_THROWS_AS(constant(g, {{1.f, 2.f}, {3.f}}), runnel::error);
}

TEST_CASE("variables register their initializers", "[ops]") {
  graph g;
  auto w = variable(g, zeros(g, dtype::f32, {2, 3}), "w");
  CHECK(w.name() == "w");
  CHECK(w.value.node().name == "w/read");
  CHECK(w.initializer.node().name == "w/Assign");
  CHECK(g.collection("variables") == std::vector<int>{w.ref.node_id()});
  auto init = global_variables_initializer(g);
  CHECK(init.node().control_inputs == std::vector<int>{w.initializer.node_id()});
  CHECK_THROWS_AS(assign(w, zeros(g, dtype::f32, {3, 3})), runnel::error);
}
