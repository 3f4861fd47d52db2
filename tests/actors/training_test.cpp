#include <cmath>
#include <fstream>

#include "runnel/ops/train/optimizers.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

/// Builds loss = sum(w²) with w = [1, 2] (f64), runs `steps` updates of `opt`, returns w.
std::vector<double> quadratic_steps(optimizer& opt, int steps) {
  runtime rt;
  graph g;
  auto w = variable(g, constant(g, {1.0, 2.0}), "w");
  auto loss = sum(square(w.value));
  auto train = opt.minimize(loss);
  auto init = global_variables_initializer(g);
  session s(rt, g);
  REQUIRE(s.run({init}).ok());
  for (int i = 0; i < steps; ++i)
    REQUIRE(s.run({train}).ok());
  auto v = s.run({}, {w.value}).value()[0];
  return {v.data<double>()[0], v.data<double>()[1]};
}

} // namespace

TEST_CASE("each optimizer's update matches the formula", "[actors]") {
  SECTION("gradient descent") {
    gradient_descent_optimizer opt(0.1);
    auto w = quadratic_steps(opt, 1);
    CHECK(w[0] == Approx(0.8));
    CHECK(w[1] == Approx(1.6));
  }
  SECTION("momentum") {
    momentum_optimizer opt(0.1, 0.9);
    auto w = quadratic_steps(opt, 2);
    CHECK(w[0] == Approx(0.46));
    CHECK(w[1] == Approx(0.92));
  }
  SECTION("nesterov momentum") {
    momentum_optimizer opt(0.1, 0.9, true);
    auto w = quadratic_steps(opt, 1);
    // accum = g; w -= lr*g + lr*mu*accum = 0.1*2 + 0.09*2
    CHECK(w[0] == Approx(1 - 0.2 - 0.18));
  }
  SECTION("adagrad") {
    adagrad_optimizer opt(0.1, 0.1);
    auto w = quadratic_steps(opt, 1);
    CHECK(w[0] == Approx(1 - 0.1 * 2 / std::sqrt(4.1)));
    CHECK(w[1] == Approx(2 - 0.1 * 4 / std::sqrt(16.1)));
  }
  SECTION("rmsprop") {
    rmsprop_optimizer opt(0.1, 0.9, 0.0, 1e-10);
    auto w = quadratic_steps(opt, 1);
    CHECK(w[0] == Approx(1 - 0.1 * 2 / std::sqrt(0.9 + 0.1 * 4)));
  }
  SECTION("adam: the first step moves each weight by about the learning rate") {
    adam_optimizer opt(0.1);
    auto w = quadratic_steps(opt, 1);
    CHECK(w[0] == Approx(0.9).epsilon(1e-6));
    CHECK(w[1] == Approx(1.9).epsilon(1e-6));
  }
}

TEST_CASE("optimizers converge on a quadratic", "[actors]") {
  adam_optimizer adam(0.1);
  auto w = quadratic_steps(adam, 300);
  CHECK(std::abs(w[0]) < 1e-2);
  CHECK(std::abs(w[1]) < 1e-2);
  gradient_descent_optimizer sgd(0.1);
  w = quadratic_steps(sgd, 100);
  CHECK(std::abs(w[0]) < 1e-6);
}

TEST_CASE("global_step advances once per applied step, and slots are named after variables",
          "[actors]") {
  runtime rt;
  graph g;
  auto w = variable(g, constant(g, {{1.f, 2.f}}), "w");
  auto b = variable(g, constant(g, {0.5f, -0.5f}), "b");
  auto step = variable(g, constant(g, int64_t(0)), "global_step", false);
  auto loss = sum(square(bias_add(w.value, b.value)));
  adam_optimizer opt(0.01);
  auto train = opt.minimize(loss, {}, &step);
  CHECK(g.find("w/Adam").has_value());
  CHECK(g.find("w/Adam_1").has_value());
  CHECK(g.find("b/Adam").has_value());
  CHECK(g.find("beta1_power").has_value());
  auto init = global_variables_initializer(g);
  session s(rt, g);
  REQUIRE(s.run({init}).ok());
  double first = 0;
  for (int i = 0; i < 5; ++i) {
    auto r = s.run({}, {loss}, {train}).value();
    if (i == 0)
      first = *r[0].data<float>();
  }
  check_equal(s.run({}, {step.value}).value()[0], tensor::scalar<int64_t>(5));
  CHECK(*s.run({}, {loss}).value()[0].data<float>() < first);
}

TEST_CASE("learning-rate schedules follow the global step", "[actors]") {
  runtime rt;
  graph g;
  auto step = variable(g, constant(g, int64_t(0)), "global_step", false);
  auto smooth = exponential_decay(0.1, step, 10, 0.5);
  auto stairs = exponential_decay(0.1, step, 10, 0.5, true);
  auto pieces = piecewise_constant(step, {5, 10}, {1.0, 0.5, 0.1});
  auto set = placeholder(g, dtype::i64, shape{}, "set");
  auto assign_step = assign(step, set);
  session s(rt, g);
  REQUIRE(s.run({step.initializer}).ok());
  auto at = [&](int64_t k) {
    REQUIRE(s.run({{set, tensor::scalar<int64_t>(k)}}, {assign_step}).ok());
    auto r = s.run({}, {smooth, stairs, pieces}).value();
    return std::vector<float>{*r[0].data<float>(), *r[1].data<float>(), *r[2].data<float>()};
  };
  auto v = at(0);
  CHECK(v[0] == Approx(0.1));
  CHECK(v[2] == Approx(1.0));
  v = at(15);
  CHECK(v[0] == Approx(0.1 * std::pow(0.5, 1.5)));
  CHECK(v[1] == Approx(0.05));
  CHECK(v[2] == Approx(0.1));
  v = at(5);
  CHECK(v[2] == Approx(1.0));
  v = at(6);
  CHECK(v[2] == Approx(0.5));
}

TEST_CASE("a logistic regression learns a separable problem", "[actors]") {
  runtime rt;
  graph g;
  g.set_seed(7);
  auto x = placeholder(g, dtype::f32, shape{-1, 2}, "x");
  auto y = placeholder(g, dtype::i32, shape{-1}, "y");
  auto w = variable(g, truncated_normal(g, {2, 2}, 0.1), "w");
  auto b = variable(g, zeros(g, dtype::f32, {2}), "b");
  auto logits = bias_add(matmul(x, w), b);
  auto loss = mean(sparse_softmax_cross_entropy_with_logits(logits, y).first);
  auto correct = mean(cast(equal(cast(argmax(logits, 1), dtype::i32), y), dtype::f32));
  gradient_descent_optimizer opt(0.5);
  auto train = opt.minimize(loss);
  session s(rt, g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  // Class 1 when x0 + x1 > 1.
  std::vector<float> xs;
  std::vector<int32_t> ys;
  for (int i = 0; i < 64; ++i) {
    float a = float((i * 37) % 64) / 64.f, c = float((i * 11) % 64) / 64.f;
    xs.insert(xs.end(), {a, c});
    ys.push_back(a + c > 1.f ? 1 : 0);
  }
  feed_list feeds{{x, tensor::from_values<float>({64, 2}, xs)}, {y, tensor::vector<int32_t>(ys)}};
  float first = *s.run(feeds, {loss}).value()[0].data<float>();
  for (int i = 0; i < 300; ++i)
    REQUIRE(s.run(feeds, {}, {train}).ok());
  auto r = s.run(feeds, {loss, correct}).value();
  CHECK(*r[0].data<float>() < first / 2);
  CHECK(*r[1].data<float>() > 0.9f);
}

#include <filesystem>

#include "runnel/actors/state/saver.hpp"

TEST_CASE("saver: save, keep the newest, restore, and refuse mismatches", "[actors]") {
  namespace fs = std::filesystem;
  auto dir = (fs::temp_directory_path() / ("runnel-saver-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  runtime rt;
  graph g;
  auto w = variable(g, constant(g, {{1.f, 2.f}, {3.f, 4.f}}), "layer/w");
  [[maybe_unused]] auto b = variable(g, constant(g, {0.5f, 0.5f}), "layer/b"); // saved too
  auto grow = assign_add(w, constant(g, {{1.f, 1.f}, {1.f, 1.f}}));
  saver sv(g, {}, {.max_to_keep = 2});
  session s(rt, g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  std::vector<std::string> paths;
  for (int step = 1; step <= 3; ++step) {
    REQUIRE(s.run({grow}).ok());
    auto p = sv.save(s, dir + "/model", step * 100);
    REQUIRE(p.ok());
    paths.push_back(*p);
  }
  CHECK(paths[2] == dir + "/model-300.h5");
  CHECK_FALSE(fs::exists(paths[0])); // max_to_keep = 2
  CHECK(fs::exists(paths[1]));
  CHECK(saver::latest_checkpoint(dir).value() == paths[2]);

  REQUIRE(s.run({grow}).ok());
  REQUIRE(sv.restore(s, paths[1]).ok());
  check_equal(s.run({}, {w.value}).value()[0], vals<float>({2, 2}, {3, 4, 5, 6}));

  // A fresh runtime restores the latest into uninitialised variables.
  runtime rt2;
  session s2(rt2, g);
  REQUIRE(sv.restore(s2, saver::latest_checkpoint(dir).value()).ok());
  check_equal(s2.run({}, {w.value}).value()[0], vals<float>({2, 2}, {4, 5, 6, 7}));

  // Only some variables, under another name in the file.
  graph h;
  auto bias = variable(h, dtype::f32, shape{2}, "bias");
  [[maybe_unused]] auto kernel = variable(h, dtype::f32, shape{3, 3}, "kernel"); // not restored
  saver hs(h);
  runtime rt3;
  session s3(rt3, h);
  REQUIRE(hs.restore(s3, paths[2], {.only = {"bias"}, .name_map = {{"bias", "layer/b"}}}).ok());
  check_equal(s3.run({}, {bias.value}).value()[0], tensor::vector<float>({0.5f, 0.5f}));
  auto mismatch =
      hs.restore(s3, paths[2], {.name_map = {{"bias", "layer/b"}, {"kernel", "layer/w"}}});
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.message().find("variable 'kernel' has shape [3,3] but checkpoint") !=
        std::string::npos);
  auto missing = hs.restore(s3, paths[2]);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.code() == error_code::not_found);
  CHECK(missing.message().find("'bias' is not in checkpoint") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("saver: a resume skips checkpoints that are missing or damaged, and stale temporaries "
          "go at the next save",
          "[actors]") {
  namespace fs = std::filesystem;
  auto dir =
      (fs::temp_directory_path() / ("runnel-saver-fallback-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  runtime rt;
  graph g;
  auto w = variable(g, constant(g, {1.f, 2.f, 3.f}), "w");
  auto grow = assign_add(w, constant(g, {1.f, 1.f, 1.f}));
  saver sv(g, {}, {.max_to_keep = 3});
  session s(rt, g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  std::vector<std::string> paths;
  for (int step = 1; step <= 3; ++step) {
    REQUIRE(s.run({grow}).ok());
    paths.push_back(sv.save(s, dir + "/model", step).value());
  }
  // The newest is damaged (cut short, as a full disk leaves it): the one before is used.
  fs::resize_file(paths[2], fs::file_size(paths[2]) / 2);
  CHECK(saver::latest_checkpoint(dir).value() == paths[1]);
  // The state file names a file that is gone, as a kill between a delete and the state file's
  // rewrite once left it: the next one listed is used.
  fs::remove(paths[1]);
  CHECK(saver::latest_checkpoint(dir).value() == paths[0]);
  // No state file at all: the directory's files, newest step first.
  fs::remove(dir + "/checkpoint");
  CHECK(saver::latest_checkpoint(dir).value() == paths[0]);
  fs::remove(paths[0]);
  auto none = saver::latest_checkpoint(dir);
  REQUIRE(!none.ok());
  CHECK_THAT(none.error().message(), Catch::Contains("model-3.h5"));

  // A save killed mid-write left temporaries: the next save removes them.
  { std::ofstream(dir + "/model-9.h5.tmp") << "partial"; }
  { std::ofstream(dir + "/checkpoint.tmp") << "partial"; }
  auto p = sv.save(s, dir + "/model", 10).value();
  CHECK_FALSE(fs::exists(dir + "/model-9.h5.tmp"));
  CHECK_FALSE(fs::exists(dir + "/checkpoint.tmp"));
  CHECK(saver::latest_checkpoint(dir).value() == p);
  fs::remove_all(dir);
}

TEST_CASE("saver: Keras-style weights written by h5py import into variables by name map",
          "[actors]") {
  namespace fs = std::filesystem;
  auto path =
      (fs::temp_directory_path() / ("runnel-keras-" + std::to_string(::getpid()) + ".h5")).string();
  std::string script = "/usr/bin/python3 -c \"import h5py, numpy as np\n"
                       "f = h5py.File('" +
                       path +
                       "', 'w')\n"
                       "g = f.create_group('model_weights/dense/dense')\n"
                       "g['kernel:0'] = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)\n"
                       "g['bias:0'] = np.array([0.5, 0, -0.5], dtype=np.float32)\n"
                       "f.close()\"";
  REQUIRE(std::system(script.c_str()) == 0);
  runtime rt;
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, 2}, "x");
  auto w = variable(g, dtype::f32, shape{2, 3}, "dense/kernel");
  auto b = variable(g, dtype::f32, shape{3}, "dense/bias");
  auto y = bias_add(matmul(x, w), b);
  saver sv(g);
  session s(rt, g);
  REQUIRE(sv.restore(s, path,
                     {.name_map = {{"dense/kernel", "model_weights/dense/dense/kernel:0"},
                                   {"dense/bias", "model_weights/dense/dense/bias:0"}}})
              .ok());
  check_equal(s.run({{x, vals<float>({1, 2}, {1, 1})}}, {y}).value()[0],
              vals<float>({1, 3}, {5.5f, 7, 8.5f}));
  fs::remove(path);
}
