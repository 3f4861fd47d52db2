// Candidate samplers (their distributions and TensorFlow's expected counts), nce_loss and
// sampled_softmax_loss against their formulas, dropout and sequence_mask.
#include <cmath>
#include <set>

#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/nn_layers.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/layers/sampled_losses.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

double log_uniform_p(int64_t k, int64_t range) {
  return std::log((double(k) + 2.0) / (double(k) + 1.0)) / std::log(double(range) + 1.0);
}

/// Frequencies of the classes over `runs` draws of `s`.
std::vector<double> frequencies(session& s, const sampled_candidates& c, int64_t range, int runs) {
  std::vector<double> f(static_cast<size_t>(range), 0.0);
  double total = 0;
  for (int r = 0; r < runs; ++r) {
    auto v = s.run({}, {c.sampled}).value()[0];
    for (auto id : v.flat<int64_t>()) {
      f[size_t(id)] += 1;
      total += 1;
    }
  }
  for (auto& x : f)
    x /= total;
  return f;
}

} // namespace

TEST_CASE("log_uniform_candidate_sampler draws Zipf-like classes with TensorFlow's counts") {
  graph g;
  g.set_seed(11);
  auto truth = constant(g, tensor::from_values<int64_t>(shape{2, 1}, {0, 7}));
  auto c = log_uniform_candidate_sampler(truth, 5, 20, {.unique = false});
  session s(test_runtime(), g);
  auto f = frequencies(s, c, 20, 3000);
  for (int64_t k = 0; k < 20; ++k)
    CHECK(std::abs(f[size_t(k)] - log_uniform_p(k, 20)) < 0.012);
  auto r = s.run({}, {c.sampled, c.true_expected_count, c.sampled_expected_count}).value();
  // Without `unique` a class's expected count is p · num_sampled.
  CHECK(r[1].flat<float>()[1] == Approx(log_uniform_p(7, 20) * 5).epsilon(1e-5));
  for (int i = 0; i < 5; ++i)
    CHECK(r[2].flat<float>()[size_t(i)] ==
          Approx(log_uniform_p(r[0].flat<int64_t>()[size_t(i)], 20) * 5).epsilon(1e-5));
}

TEST_CASE("unique samplers draw distinct classes and count the tries in the expected counts") {
  graph g;
  g.set_seed(5);
  auto truth = constant(g, tensor::from_values<int64_t>(shape{1, 2}, {3, 4}));
  auto c = log_uniform_candidate_sampler(truth, 12, 16, {.num_true = 2});
  auto u = uniform_candidate_sampler(truth, 16, 16, {.num_true = 2});
  session s(test_runtime(), g);
  for (int run = 0; run < 20; ++run) {
    auto r = s.run({}, {c.sampled, c.true_expected_count, c.sampled_expected_count, u.sampled})
                 .value();
    auto ids = r[0].flat<int64_t>();
    CHECK(std::set<int64_t>(ids.begin(), ids.end()).size() == 12);
    // One number of tries explains every expected count: 1 - (1 - p)^tries.
    double p0 = log_uniform_p(ids[0], 16);
    double tries = std::log1p(-double(r[2].flat<float>()[0])) / std::log1p(-p0);
    CHECK(tries >= 12 - 1e-3);
    CHECK(std::abs(tries - std::round(tries)) < 1e-2 * tries);
    tries = std::round(tries);
    for (int i = 0; i < 12; ++i)
      CHECK(r[2].flat<float>()[size_t(i)] ==
            Approx(-std::expm1(tries * std::log1p(-log_uniform_p(ids[size_t(i)], 16))))
                .epsilon(1e-4));
    CHECK(r[1].flat<float>()[1] ==
          Approx(-std::expm1(tries * std::log1p(-log_uniform_p(4, 16)))).epsilon(1e-4));
    auto all = r[3].flat<int64_t>();
    CHECK(std::set<int64_t>(all.begin(), all.end()).size() == 16); // every class once
  }
}

TEST_CASE("fixed_unigram_candidate_sampler follows the counts and skips reserved ids") {
  graph g;
  g.set_seed(2);
  auto truth = constant(g, tensor::from_values<int64_t>(shape{1, 1}, {2}));
  // Ids 0 (reserved), 1 (count 0), 2 (count 1), 3 (count 9): distorted by 0.5, P(2) = 1/4.
  auto c = fixed_unigram_candidate_sampler(truth, 8, {0, 1, 9}, 0.5, 1, {.unique = false});
  session s(test_runtime(), g);
  auto f = frequencies(s, c, 4, 1000);
  CHECK(f[0] == 0.0);
  CHECK(f[1] == 0.0);
  CHECK(std::abs(f[2] - 0.25) < 0.02);
  auto r = s.run({}, {c.true_expected_count}).value();
  CHECK(r[0].flat<float>()[0] == Approx(0.25 * 8));
}

TEST_CASE("samplers refuse true classes outside the range and impossible unique draws") {
  graph g;
  auto truth = placeholder(g, dtype::i64, shape{-1, 1}, "truth");
  auto c = uniform_candidate_sampler(truth, 3, 10);
  session s(test_runtime(), g);
  auto r = s.run({{truth, tensor::from_values<int64_t>(shape{2, 1}, {1, 10})}}, {c.sampled});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("true class 10") && Catch::Contains("[0, 10)"));
  CHECK_THROWS_WITH(uniform_candidate_sampler(truth, 11, 10),
                    Catch::Contains("11 unique candidates from a range of 10"));
}

TEST_CASE("nce_loss is the sigmoid cross-entropy of the corrected true and sampled logits") {
  graph g;
  auto w = constant(g, {{0.1f, 0.2f}, {0.3f, -0.1f}, {-0.2f, 0.4f}, {0.5f, 0.0f}});
  auto b = constant(g, {0.1f, -0.2f, 0.3f, 0.0f});
  auto x = constant(g, {{1.0f, 2.0f}, {-1.0f, 0.5f}});
  auto labels = constant(g, tensor::from_values<int64_t>(shape{2, 1}, {2, 1}));
  sampled_candidates fixed{constant(g, {int64_t(1), int64_t(3)}),
                           constant(g, tensor::from_values<float>(shape{2, 1}, {0.5f, 0.25f})),
                           constant(g, {0.25f, 0.125f})};
  auto loss = nce_loss(w, b, labels, x, {.num_sampled = 2, .num_classes = 4,
                                         .sampled_values = fixed});
  auto soft = sampled_softmax_loss(w, b, labels, x, {.num_sampled = 2, .num_classes = 4,
                                                     .sampled_values = fixed});
  auto r = eval({loss, soft});
  float W[4][2] = {{0.1f, 0.2f}, {0.3f, -0.1f}, {-0.2f, 0.4f}, {0.5f, 0.0f}};
  float B[4] = {0.1f, -0.2f, 0.3f, 0.0f}, X[2][2] = {{1, 2}, {-1, 0.5f}};
  int label[2] = {2, 1}, sampled[2] = {1, 3};
  double true_q[2] = {0.5, 0.25}, sampled_q[2] = {0.25, 0.125};
  auto logit = [&](int e, int cls, double q) {
    return W[cls][0] * X[e][0] + W[cls][1] * X[e][1] + B[cls] - std::log(q);
  };
  auto xent = [](double z, double y) { return std::log1p(std::exp(-z)) + (1 - y) * z; };
  for (int e = 0; e < 2; ++e) {
    double nce = xent(logit(e, label[e], true_q[e]), 1.0);
    std::vector<double> logits{logit(e, label[e], true_q[e])};
    for (int k = 0; k < 2; ++k) {
      nce += xent(logit(e, sampled[k], sampled_q[k]), 0.0);
      // sampled_softmax removes accidental hits: example 1's label 1 was also sampled.
      logits.push_back(sampled[k] == label[e] ? -1e30 : logit(e, sampled[k], sampled_q[k]));
    }
    double m = *std::max_element(logits.begin(), logits.end()), z = 0;
    for (double l : logits)
      z += std::exp(l - m);
    CHECK(r[0].flat<float>()[size_t(e)] == Approx(nce).epsilon(1e-5));
    CHECK(r[1].flat<float>()[size_t(e)] == Approx(m + std::log(z) - logits[0]).epsilon(1e-5));
  }
}

TEST_CASE("sampled_softmax_loss over every class with counts of one is the full softmax loss") {
  graph g;
  auto w = constant(g, {{0.1f, 0.2f}, {0.3f, -0.1f}, {-0.2f, 0.4f}});
  auto b = constant(g, {0.1f, -0.2f, 0.3f});
  auto x = constant(g, {{1.0f, 2.0f}, {-1.0f, 0.5f}});
  auto labels = constant(g, tensor::from_values<int64_t>(shape{2, 1}, {2, 0}));
  sampled_candidates every{constant(g, {int64_t(0), int64_t(1), int64_t(2)}), ones(g, dtype::f32, {2, 1}),
                           ones(g, dtype::f32, {3})};
  auto sampled = sampled_softmax_loss(w, b, labels, x, {.num_sampled = 3, .num_classes = 3,
                                                        .sampled_values = every});
  auto full = sparse_softmax_cross_entropy_with_logits(
                  matmul(x, w, {.transpose_b = true}) + b,
                  reshape(labels, std::vector<int64_t>{-1}))
                  .first;
  auto r = eval({sampled, full});
  check_close(r[0], r[1], 1e-5, 1e-6);
}

TEST_CASE("word vectors trained with nce_loss get sparse gradients and a falling loss") {
  graph g;
  g.set_seed(4);
  const int64_t vocab = 50, dim = 8;
  auto emb = variable(g, random_uniform(g, shape{vocab, dim}), "nce_test_emb");
  auto w = variable(g, truncated_normal(g, shape{vocab, dim}, 0.1), "nce_test_w");
  auto b = variable(g, zeros(g, dtype::f32, shape{vocab}), "nce_test_b");
  auto centre = placeholder(g, dtype::i32, shape{-1}, "centre");
  auto context = placeholder(g, dtype::i64, shape{-1, 1}, "context");
  auto loss = mean(nce_loss(w.value, b.value, context, embedding_lookup(emb.value, centre),
                            {.num_sampled = 6, .num_classes = vocab}));
  auto gv = gradient_values({loss}, {emb.ref, w.ref, b.ref});
  for (auto& v : gv)
    CHECK(v.is_sparse());
  auto step = gradient_descent_optimizer(0.5).minimize(loss);
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  // A toy corpus: word i predicts word (i + 1) % 10.
  std::vector<int32_t> c;
  std::vector<int64_t> t;
  for (int i = 0; i < 10; ++i) {
    c.push_back(i);
    t.push_back((i + 1) % 10);
  }
  feed_list feeds{{centre, tensor::vector<int32_t>(c)},
                  {context, tensor::from_values<int64_t>(shape{10, 1}, t)}};
  double first = 0, last = 0;
  for (int i = 0; i < 300; ++i) {
    auto r = s.run(feeds, {loss}, {step}).value();
    (i == 0 ? first : last) = *r[0].data<float>();
  }
  CHECK(last < first * 0.5);
}

TEST_CASE("dropout keeps about keep_prob of the elements, scaled, only when training") {
  graph g;
  g.set_seed(9);
  auto x = placeholder(g, dtype::f32, shape{-1, 100}, "x");
  auto training = placeholder(g, dtype::boolean, shape{}, "training");
  auto y = dropout(x, 0.25, training);
  auto grad = gradients({sum(y * 3.0)}, {x})[0];
  session s(test_runtime(), g);
  tensor ones_in(dtype::f32, shape{40, 100});
  for (auto& v : ones_in.flat<float>())
    v = 2.0f;
  auto r = s.run({{x, ones_in}, {training, tensor::scalar<bool>(true)}}, {y, grad}).value();
  int kept = 0;
  for (size_t i = 0; i < 4000; ++i) {
    float v = r[0].flat<float>()[i];
    CHECK((v == 0.0f || v == 8.0f));
    kept += v != 0.0f;
    CHECK(r[1].flat<float>()[i] == (v == 0.0f ? 0.0f : 12.0f));
  }
  CHECK(std::abs(kept / 4000.0 - 0.25) < 0.03);
  auto off = s.run({{x, ones_in}, {training, tensor::scalar<bool>(false)}}, {y}).value();
  check_equal(off[0], ones_in);
  CHECK_THROWS_WITH(dropout(x, 1.5, training), Catch::Contains("keep_prob"));
}

TEST_CASE("sequence_mask marks the positions below each length") {
  graph g;
  auto lengths = constant(g, {int32_t(2), int32_t(0), int32_t(4)});
  auto m = sequence_mask(lengths, 3);
  auto r = eval({m});
  check_equal(r[0], vals<float>({3, 3}, {1, 1, 0, 0, 0, 0, 1, 1, 1}));
}

TEST_CASE("NegTrain takes one skip-gram step per pair on the rows named") {
  graph g;
  auto w_in = variable(g, constant(g, {{1.0f, 0.0f}, {0.0f, 2.0f}}), "negtrain_in");
  auto w_out = variable(g, constant(g, {{0.5f, 0.5f}, {0.0f, 0.0f}}), "negtrain_out");
  auto ex = placeholder(g, dtype::i32, shape{-1}, "examples");
  auto lb = placeholder(g, dtype::i32, shape{-1}, "labels");
  auto loss = neg_train(w_in, w_out, ex, lb, constant(g, 0.1f), {3, 1}, /*num_negative=*/0);
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto r = s.run({{ex, tensor::vector<int32_t>({0})}, {lb, tensor::vector<int32_t>({0})}}, {loss})
               .value();
  double x = 0.5, sig = 1 / (1 + std::exp(-x)), grad = 1 - sig;
  CHECK(r[0].flat<float>()[0] == Approx(-std::log(sig)).epsilon(1e-5));
  auto v = s.run({}, {w_in.value, w_out.value}).value();
  check_close(v[0], vals<float>({2, 2}, {float(1 + 0.1 * grad * 0.5), float(0.1 * grad * 0.5), 0, 2}));
  check_close(v[1], vals<float>({2, 2}, {float(0.5 + 0.1 * grad), 0.5f, 0, 0}));
  auto bad = s.run({{ex, tensor::vector<int32_t>({0})}, {lb, tensor::vector<int32_t>({2})}}, {loss});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message(), Catch::Contains("id 2") && Catch::Contains("[0, 2)"));
}

TEST_CASE("NegTrain with negatives and two threads lowers the loss of a toy corpus") {
  graph g;
  g.set_seed(3);
  const int64_t vocab = 20, dim = 8;
  auto w_in = variable(g, random_uniform(g, shape{vocab, dim}) - 0.5, "negtrain_in2");
  auto w_out = variable(g, zeros(g, dtype::f32, shape{vocab, dim}), "negtrain_out2");
  std::vector<int32_t> ex, lb;
  for (int rep = 0; rep < 50; ++rep)
    for (int i = 0; i < vocab; ++i) {
      ex.push_back(i);
      lb.push_back((i + 1) % vocab);
    }
  auto loss = neg_train(w_in, w_out, constant(g, tensor::vector<int32_t>(ex)),
                        constant(g, tensor::vector<int32_t>(lb)), constant(g, 0.05f),
                        std::vector<int64_t>(size_t(vocab), 10), 5, /*num_threads=*/2);
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  double first = *s.run({}, {loss}).value()[0].data<float>(), last = first;
  for (int i = 0; i < 30; ++i)
    last = *s.run({}, {loss}).value()[0].data<float>();
  CHECK(last < 0.5 * first);
}

TEST_CASE("batch_norm normalises with batch statistics when training, moving ones otherwise") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, 3}, "bn_x");
  auto training = placeholder(g, dtype::boolean, shape{}, "bn_training");
  auto bn = batch_norm(x, training, {.momentum = 0.9, .epsilon = 1e-3, .name = "bn_test"});
  // The same with primitive ops, for values and gradients.
  auto mu = mean(x, {0}, true);
  auto var = mean(square(x - mu), {0}, true);
  auto reference = (x - mu) / sqrt(var + 1e-3) * bn.gamma.value + bn.beta.value;
  auto w = constant(g, {{1.0f, -2.0f, 0.5f}, {0.3f, 1.0f, 2.0f}, {-1.0f, 0.0f, 1.5f},
                        {2.0f, 0.7f, -0.4f}});
  auto grads = gradients({sum(bn.y * w)}, {x, bn.gamma.value, bn.beta.value});
  auto ref_grads = gradients({sum(reference * w)}, {x, bn.gamma.value, bn.beta.value});
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto xv = vals<float>({4, 3}, {1, 2, 3, 2, 4, 1, 3, 6, 2, 6, 0, 2});
  feed_list train_feeds{{x, xv}, {training, tensor::scalar<bool>(true)}};
  auto r = s.run(train_feeds, {bn.y, reference, grads[0], ref_grads[0], grads[1], ref_grads[1],
                               grads[2], ref_grads[2]})
               .value();
  for (size_t k = 0; k < r.size(); k += 2)
    check_close(r[k], r[k + 1], 1e-4, 1e-5);
  // One training step moved the averages 10% of the way to the batch's (unbiased) statistics.
  auto moving = s.run({}, {bn.moving_mean.value, bn.moving_variance.value}).value();
  check_close(moving[0], tensor::vector<float>({0.3f, 0.3f, 0.2f}));
  check_close(moving[1], tensor::vector<float>({0.9f + 0.1f * 14.0f / 3.0f, 0.9f + 0.1f * 20.0f / 3.0f,
                                                0.9f + 0.1f * 2.0f / 3.0f}));
  // Inference uses them and leaves them alone.
  auto inf = s.run({{x, xv}, {training, tensor::scalar<bool>(false)}}, {bn.y, grads[0]}).value();
  auto again = s.run({}, {bn.moving_mean.value}).value();
  check_equal(again[0], moving[0]);
  float expect = (1.0f - 0.3f) / std::sqrt(moving[1].flat<float>()[0] + 1e-3f);
  CHECK(inf[0].flat<float>()[0] == Approx(expect).epsilon(1e-5));
  CHECK(inf[1].flat<float>()[0] == Approx(1.0f / std::sqrt(moving[1].flat<float>()[0] + 1e-3f)).epsilon(1e-5));
}
