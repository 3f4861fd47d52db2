#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("Const, Identity, Shape and Reshape", "[ops]") {
  graph g;
  auto a = constant(g, vals<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto r = eval(
      {identity(a), shape_of(a), shape_of(a, dtype::i64), reshape(a, {3, -1}), reshape(a, {6})});
  check_equal(r[0], vals<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  check_equal(r[1], tensor::vector<int32_t>({2, 3}));
  check_equal(r[2], tensor::vector<int64_t>({2, 3}));
  check_equal(r[3], vals<float>({3, 2}, {1, 2, 3, 4, 5, 6}));
  CHECK(r[3].shares_buffer_with(r[0])); // reshape is a view
  check_equal(r[4], tensor::vector<float>({1, 2, 3, 4, 5, 6}));
}

TEST_CASE("Reshape of a fed tensor with the wrong size is a clear run-time error", "[ops]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape::unknown(), "x");
  auto y = reshape(x, {2, 2}, "square");
  auto s = eval_error(y, {{x, tensor::vector<float>({1, 2, 3})}});
  CHECK(s.message().find("node 'square' (op Reshape): cannot reshape a tensor with 3 elements") !=
        std::string::npos);
}

TEST_CASE("Transpose permutes any rank", "[ops]") {
  graph g;
  auto a = constant(g, vals<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}));
  std::vector<int32_t> v(24);
  for (int i = 0; i < 24; ++i)
    v[size_t(i)] = i;
  auto b = constant(g, vals<int32_t>({2, 3, 4}, v));
  auto r = eval({transpose(a), transpose(b, {1, 2, 0}), transpose(b, {0, 1, 2})});
  check_equal(r[0], vals<int32_t>({3, 2}, {1, 4, 2, 5, 3, 6}));
  CHECK(r[1].shape() == shape({3, 4, 2}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        CHECK(r[1].data<int32_t>()[(j * 4 + k) * 2 + i] == (i * 3 + j) * 4 + k);
  check_equal(r[2], vals<int32_t>({2, 3, 4}, v));
}

TEST_CASE("ConcatV2 joins along any axis", "[ops]") {
  graph g;
  auto a = constant(g, vals<float>({2, 2}, {1, 2, 3, 4}));
  auto b = constant(g, vals<float>({2, 1}, {5, 6}));
  auto c = constant(g, vals<float>({1, 2}, {7, 8}));
  auto r = eval({concat({a, b}, 1), concat({a, c}, 0), concat({a, b}, -1)});
  check_equal(r[0], vals<float>({2, 3}, {1, 2, 5, 3, 4, 6}));
  check_equal(r[1], vals<float>({3, 2}, {1, 2, 3, 4, 7, 8}));
  check_equal(r[2], r[0]);
  auto s = eval1(concat({constant(g, tensor::vector<std::string>({"a"})),
                         constant(g, tensor::vector<std::string>({"b", "c"}))},
                        0));
  check_equal(s, tensor::vector<std::string>({"a", "b", "c"}));
  CHECK_THROWS_AS(concat({a, c}, 1), runnel::error);
}

TEST_CASE("Fill, ZerosLike and OnesLike", "[ops]") {
  graph g;
  auto r = eval({fill(constant(g, {2, 2}), constant(g, 7.5f)), zeros_like(constant(g, {1, 2, 3})),
                 ones_like(constant(g, {1.0, 2.0}))});
  check_equal(r[0], vals<float>({2, 2}, {7.5f, 7.5f, 7.5f, 7.5f}));
  check_equal(r[1], tensor::vector<int32_t>({0, 0, 0}));
  check_equal(r[2], tensor::vector<double>({1, 1}));
  auto x = placeholder(g, dtype::i32, shape{2}, "dims");
  auto s = eval_error(fill(x, constant(g, 1.f)), {{x, tensor::vector<int32_t>({2, -1})}});
  CHECK(s.message().find("negative dimension -1") != std::string::npos);
}

TEST_CASE("Gather picks rows, including along inner axes, and checks indices", "[ops]") {
  graph g;
  auto p = constant(g, vals<float>({3, 2}, {1, 2, 3, 4, 5, 6}));
  auto r = eval({gather(p, constant(g, {2, 0, 2})), gather(p, constant(g, {1}), 1),
                 gather(p, constant(g, vals<int64_t>({2, 2}, {0, 1, 2, 0})))});
  check_equal(r[0], vals<float>({3, 2}, {5, 6, 1, 2, 5, 6}));
  check_equal(r[1], vals<float>({3, 1}, {2, 4, 6}));
  check_equal(r[2], vals<float>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 1, 2}));
  auto idx = placeholder(g, dtype::i32, shape{-1}, "idx");
  auto s = eval_error(gather(p, idx, 0, "lookup"), {{idx, tensor::vector<int32_t>({0, 3})}});
  CHECK(s.message() == "node 'lookup' (op GatherV2): indices[1] = 3 is not in [0, 3)");
}

TEST_CASE("OneHot along the last and first axes", "[ops]") {
  graph g;
  auto i = constant(g, {0, 2, 5});
  auto r = eval({one_hot(i, 3), one_hot(i, 3, 5.0, -1.0, dtype::i32, 0)});
  check_equal(r[0], vals<float>({3, 3}, {1, 0, 0, 0, 0, 1, 0, 0, 0}));
  check_equal(r[1], vals<int32_t>({3, 3}, {5, -1, -1, -1, -1, -1, -1, 5, -1}));
}

TEST_CASE("Print passes its input through", "[ops]") {
  graph g;
  auto r = eval1(print(constant(g, {1, 2}), "values: "));
  check_equal(r, tensor::vector<int32_t>({1, 2}));
}

TEST_CASE("random ops are reproducible with graph and op seeds", "[ops]") {
  auto draw = [](std::optional<int64_t> graph_seed, int64_t op_seed) {
    graph g;
    if (graph_seed)
      g.set_seed(*graph_seed);
    auto u = random_uniform(g, {1000}, dtype::f32, op_seed);
    session s(test_runtime(), g);
    auto a = s.run({}, {u}).value()[0];
    auto b = s.run({}, {u}).value()[0];
    return std::pair{a, b};
  };
  auto [a1, a2] = draw(42, 7);
  auto [b1, b2] = draw(42, 7);
  CHECK(equal(a1, b1));
  CHECK(equal(a2, b2));
  CHECK_FALSE(equal(a1, a2)); // each run draws anew
  auto [c1, c2] = draw(std::nullopt, 0);
  auto [d1, d2] = draw(std::nullopt, 0);
  CHECK_FALSE(equal(c1, d1)); // unseeded: different every time
  double sum = 0, lo = 1, hi = 0;
  for (float v : a1.flat<float>()) {
    sum += v;
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  CHECK(sum / 1000 == Approx(0.5).margin(0.05));
  CHECK(lo >= 0);
  CHECK(hi < 1);

  graph g;
  g.set_seed(1);
  auto n = random_normal(g, {20000}, 2.0);
  auto t = truncated_normal(g, {20000}, 1.0, dtype::f64);
  auto r = eval({n, t});
  double m = 0, v = 0;
  for (float x : r[0].flat<float>())
    m += x;
  m /= 20000;
  for (float x : r[0].flat<float>())
    v += (x - m) * (x - m);
  CHECK(m == Approx(0).margin(0.05));
  CHECK(std::sqrt(v / 20000) == Approx(2).epsilon(0.05));
  for (double x : r[1].flat<double>())
    REQUIRE(std::abs(x) <= 2.0);
}

TEST_CASE("multinomial draws each row's classes with its softmax probabilities, seeded", "[ops]") {
  auto draw = [](int64_t seed, dtype out) {
    graph g;
    g.set_seed(seed);
    float inf = std::numeric_limits<float>::infinity();
    auto logits = constant(
        g, tensor::from_values<float>(shape{2, 4}, {std::log(0.6f), std::log(0.3f), std::log(0.1f),
                                                    -inf, 0, -inf, -inf, -inf}));
    return eval1(multinomial(logits, 20000, 0, out));
  };
  auto a = draw(3, dtype::i64), b = draw(3, dtype::i64);
  CHECK(a.shape() == shape{2, 20000});
  CHECK(equal(a, b)); // the same seeds, the same draws
  std::vector<int> counts(4);
  for (int64_t i = 0; i < 20000; ++i) {
    counts[size_t(a.data<int64_t>()[i])]++;
    REQUIRE(a.data<int64_t>()[20000 + i] == 0); // every other class of row 1 is -inf
  }
  CHECK(counts[0] / 20000.0 == Approx(0.6).margin(0.02));
  CHECK(counts[1] / 20000.0 == Approx(0.3).margin(0.02));
  CHECK(counts[2] / 20000.0 == Approx(0.1).margin(0.02));
  CHECK(counts[3] == 0);
  CHECK(draw(3, dtype::i32).type() == dtype::i32);

  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, -1}, "x");
  auto m = multinomial(x, 2, 0, dtype::i64, "draw");
  float nan = std::numeric_limits<float>::quiet_NaN();
  float inf = std::numeric_limits<float>::infinity();
  auto error_for = [&](tensor v) { return eval_error(m, {{x, v}}).message(); };
  CHECK_THAT(error_for(tensor::from_values<float>(shape{2, 2}, {0, 0, nan, 1})),
             Catch::Contains("node 'draw/Multinomial' (op Multinomial): row 1 of the logits "
                             "holds a NaN"));
  CHECK_THAT(error_for(tensor::from_values<float>(shape{1, 2}, {-inf, -inf})),
             Catch::Contains("row 0 of the logits has no finite value"));
  CHECK_THAT(error_for(tensor(dtype::f32, shape{2, 0})),
             Catch::Contains("at least one class, got shape [2,0]"));
  CHECK_THROWS(multinomial(constant(g, tensor::vector<float>({1, 2})), 1)); // not a matrix
}
