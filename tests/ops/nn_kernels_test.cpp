#include <cmath>
#include <random>
#include <tuple>

#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("BiasAdd adds along the last dimension", "[ops]") {
  graph g;
  auto v = constant(g, vals<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto r = eval1(bias_add(v, constant(g, {10.f, 20.f, 30.f})));
  check_equal(r, vals<float>({2, 3}, {11, 22, 33, 14, 25, 36}));
  CHECK_THROWS_AS(bias_add(v, constant(g, {1.f, 2.f})), runnel::error);
}

TEST_CASE("Softmax is stable for large logits", "[ops]") {
  graph g;
  auto x = constant(g, vals<float>({2, 3}, {1, 2, 3, 1000, 1000, 1000}));
  auto r = eval1(softmax(x));
  float e1 = std::exp(1.f), e2 = std::exp(2.f), e3 = std::exp(3.f), z = e1 + e2 + e3;
  check_close(r, vals<float>({2, 3}, {e1 / z, e2 / z, e3 / z, 1 / 3.f, 1 / 3.f, 1 / 3.f}));
}

TEST_CASE("softmax cross-entropy: loss and backprop by hand", "[ops]") {
  graph g;
  auto logits = constant(g, vals<double>({2, 3}, {1, 2, 3, 0, 0, 0}));
  auto labels = constant(g, vals<double>({2, 3}, {0, 0, 1, 0.5, 0.5, 0}));
  auto [loss, backprop] = softmax_cross_entropy_with_logits(logits, labels);
  auto r = eval({loss, backprop});
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  double p1 = std::exp(1.0) / z, p2 = std::exp(2.0) / z, p3 = std::exp(3.0) / z;
  check_close(r[0], tensor::vector<double>({-std::log(p3), std::log(3.0)}), 1e-12);
  check_close(r[1], vals<double>({2, 3}, {p1, p2, p3 - 1, 1 / 3.0 - 0.5, 1 / 3.0 - 0.5, 1 / 3.0}),
              1e-12);

  auto [sloss, sback] =
      sparse_softmax_cross_entropy_with_logits(logits, constant(g, vals<int64_t>({2}, {2, 0})));
  auto s = eval({sloss, sback});
  check_close(s[0], tensor::vector<double>({-std::log(p3), std::log(3.0)}), 1e-12);
  check_close(s[1], vals<double>({2, 3}, {p1, p2, p3 - 1, 1 / 3.0 - 1, 1 / 3.0, 1 / 3.0}), 1e-12);
}

TEST_CASE("sparse cross-entropy rejects labels out of range", "[ops]") {
  graph g;
  auto labels = placeholder(g, dtype::i32, shape{-1}, "labels");
  auto [loss, _] = sparse_softmax_cross_entropy_with_logits(
      constant(g, vals<float>({2, 3}, {1, 2, 3, 4, 5, 6})), labels, "xent");
  auto s = eval_error(loss, {{labels, tensor::vector<int32_t>({1, 3})}});
  CHECK(s.message().find("node 'xent' (op SparseSoftmaxCrossEntropyWithLogits): received a label "
                         "value of 3 in row 1") != std::string::npos);
}

TEST_CASE("cross-entropy over no class is an error naming the shape, over no row an empty result",
          "[ops]") {
  graph g;
  auto logits = placeholder(g, dtype::f32, shape{-1, -1}, "logits");
  auto labels = placeholder(g, dtype::f32, shape{-1, -1}, "labels");
  auto [loss, backprop] = softmax_cross_entropy_with_logits(logits, labels, "xent");
  auto none = tensor(dtype::f32, shape{3, 0});
  auto s = eval_error(loss, {{logits, none}, {labels, none}});
  CHECK(s.message().find("node 'xent' (op SoftmaxCrossEntropyWithLogits): logits must have at "
                         "least one class, got shape [3,0]") != std::string::npos);
  auto sparse = placeholder(g, dtype::i64, shape{-1}, "sparse");
  auto [sloss, _] = sparse_softmax_cross_entropy_with_logits(logits, sparse, "sxent");
  auto e = eval_error(sloss, {{logits, none}, {sparse, tensor(dtype::i64, shape{3})}});
  CHECK(e.message().find("at least one class") != std::string::npos);
  auto empty = tensor(dtype::f32, shape{0, 4});
  auto r = eval({loss, backprop}, {{logits, empty}, {labels, empty}});
  CHECK(r[0].shape() == shape{0});
  CHECK(r[1].shape() == shape{0, 4});
}

TEST_CASE("a small model graph evaluates to the hand-computed numbers", "[ops]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, 2}, "x");
  auto w = constant(g, {{1.f, -1.f}, {0.5f, 2.f}});
  auto b = constant(g, {0.f, 1.f});
  auto h = relu(bias_add(matmul(x, w), b));
  auto y = softmax(h);
  auto r = eval({h, y}, {{x, vals<float>({1, 2}, {2, 1})}});
  // x·w = [2.5, 0], + b = [2.5, 1]
  check_equal(r[0], vals<float>({1, 2}, {2.5f, 1.f}));
  float e = std::exp(1.5f);
  check_close(r[1], vals<float>({1, 2}, {e / (1 + e), 1 / (1 + e)}));
}

TEST_CASE("Conv2D matches a hand computation, with SAME and VALID padding", "[ops]") {
  graph g;
  // 1 image 3x3, 1 channel; a 2x2 filter of ones with 2 output channels (second doubled).
  auto x = constant(g, vals<float>({1, 3, 3, 1}, {1, 2, 3, 4, 5, 6, 7, 8, 9}));
  auto f = constant(g, vals<float>({2, 2, 1, 2}, {1, 2, 1, 2, 1, 2, 1, 2}));
  auto r = eval(
      {conv2d(x, f, {1, 1}, "VALID"), conv2d(x, f, {1, 1}, "SAME"), conv2d(x, f, {2, 2}, "SAME")});
  check_equal(r[0], vals<float>({1, 2, 2, 2}, {12, 24, 16, 32, 24, 48, 28, 56}));
  // SAME pads the bottom/right by one: the last row/column sums fewer pixels.
  check_equal(r[1], vals<float>({1, 3, 3, 2}, {12, 24, 16, 32, 9, 18, 24, 48, 28, 56, 15, 30, 15,
                                               30, 17, 34, 9, 18}));
  check_equal(r[2], vals<float>({1, 2, 2, 2}, {12, 24, 9, 18, 15, 30, 9, 18}));
  // A 1x1 convolution is a matrix product over pixels.
  auto one = eval1(conv2d(x, constant(g, vals<float>({1, 1, 1, 2}, {1, -1}))));
  CHECK(one.data<float>()[2 * 4] == 5);
  CHECK(one.data<float>()[2 * 4 + 1] == -5);
  CHECK_THROWS_AS(conv2d(x, constant(g, vals<float>({2, 2, 3, 1}, std::vector<float>(12, 1.f)))),
                  runnel::error);
}

TEST_CASE("MaxPool and AvgPool, including padded windows", "[ops]") {
  graph g;
  auto x = constant(g, vals<float>({1, 3, 3, 1}, {1, 2, 3, 4, 5, 6, 7, 8, 9}));
  auto r = eval({max_pool(x, {2, 2}, {1, 1}), avg_pool(x, {2, 2}, {1, 1}),
                 max_pool(x, {2, 2}, {2, 2}, "SAME"), avg_pool(x, {2, 2}, {2, 2}, "SAME")});
  check_equal(r[0], vals<float>({1, 2, 2, 1}, {5, 6, 8, 9}));
  check_equal(r[1], vals<float>({1, 2, 2, 1}, {3, 4, 6, 7}));
  check_equal(r[2], vals<float>({1, 2, 2, 1}, {5, 6, 8, 9}));
  check_equal(r[3], vals<float>({1, 2, 2, 1}, {3, 4.5f, 7.5f, 9})); // padding not counted
}

TEST_CASE("Conv2D's fast path matches the im2col + BLAS reference", "[ops]") {
  graph g;
  std::mt19937 rng(5);
  auto random = [&](shape s) { return uniform_tensor(rng, s); };
  for (auto [stride, padding, k] : {std::tuple{1, "SAME", 3}, std::tuple{2, "VALID", 3},
                                    std::tuple{2, "SAME", 5}, std::tuple{1, "VALID", 1}}) {
    auto x = constant(g, random({2, 9, 7, 5}));
    auto f = constant(g, random({k, k, 5, 6}));
    attr_map attrs{{"strides", std::vector<int64_t>{1, stride, stride, 1}},
                   {"padding", std::string(padding)}};
    auto fast = g.build("Conv2D", "fast", {x.ep(), f.ep()}, attrs)[0];
    attrs["_reference"] = true;
    auto reference = g.build("Conv2D", "reference", {x.ep(), f.ep()}, attrs)[0];
    auto r = eval({fast, reference});
    INFO("stride " << stride << " padding " << padding << " window " << k);
    check_close(r[0], r[1], 1e-4, 1e-4);
  }
}

TEST_CASE("Conv2D's fast paths and backprops match the im2col + BLAS reference", "[ops]") {
  graph g;
  std::mt19937 rng(7);
  auto random = [&](shape s) { return uniform_tensor(rng, s); };
  // Batches of 5 split unevenly over the pool's blocks; the last three cases are windows over
  // whole rows (the text CNN's over whole word vectors, one input channel), products of rows.
  for (auto [stride, padding, kh, kw, h, w, c] :
       {std::tuple{1, "SAME", 3, 3, 9, 7, 5}, std::tuple{2, "VALID", 3, 3, 9, 7, 5},
        std::tuple{2, "SAME", 5, 5, 9, 7, 5}, std::tuple{1, "VALID", 4, 16, 20, 16, 1},
        std::tuple{1, "VALID", 1, 7, 9, 7, 5}, std::tuple{1, "VALID", 9, 7, 9, 7, 3}}) {
    int o = 6;
    tensor xv = random({5, h, w, c}), fv = random({kh, kw, c, o});
    attr_map attrs{{"strides", std::vector<int64_t>{1, stride, stride, 1}},
                   {"padding", std::string(padding)}};
    auto x = constant(g, xv), f = constant(g, fv);
    auto y = g.build("Conv2D", "", {x.ep(), f.ep()}, attrs)[0];
    auto dy = constant(g, random(eval1(y).shape()));
    auto x_sizes = constant(g, vals<int32_t>({4}, {5, h, w, c}));
    auto f_sizes = constant(g, vals<int32_t>({4}, {kh, kw, c, o}));
    std::vector<output> outs;
    for (bool reference : {false, true}) {
      attr_map a = attrs;
      if (reference)
        a["_reference"] = true;
      outs.push_back(g.build("Conv2DBackpropInput", "", {x_sizes.ep(), f.ep(), dy.ep()}, a)[0]);
      outs.push_back(g.build("Conv2DBackpropFilter", "", {x.ep(), f_sizes.ep(), dy.ep()}, a)[0]);
      outs.push_back(g.build("Conv2D", "", {x.ep(), f.ep()}, a)[0]);
    }
    auto r = eval(outs);
    INFO("stride " << stride << " padding " << padding << " window " << kh << "x" << kw);
    for (size_t i = 0; i < 3; ++i)
      check_close(r[i], r[i + 3], 1e-4, 1e-4);
  }
}
