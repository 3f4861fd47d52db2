// The classic Iris DNN classifier (4-10-10-3, ReLU) on the 150-row table shipped in
// apps/train/data/iris.csv: a 120/30 split, training with a progress line and checkpoints, test
// accuracy, and class probabilities for new flowers.
//
//   iris [--steps N] [--csv FILE] [--plot FILE] [--checkpoint-dir DIR] [--resume]
//        [--predict "5.1,3.3,1.7,0.5;6.9,3.1,5.4,2.1"] [--min-accuracy A]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include "runnel/actors/state/saver.hpp"
#include "runnel/apps/support/app_support.hpp"
#include "runnel/apps/support/training_log.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/storage/checkpoint.hpp"

using namespace runnel;
using namespace runnel::apps;

namespace {

const char* species[3] = {"setosa", "versicolor", "virginica"};

const char* usage =
    "usage: iris [options]\n"
    "Trains a 4-10-10-3 DNN on the Iris table (120 rows) and tests it on the other 30.\n"
    "  --data FILE          the table (default: apps/train/data/iris.csv in the source tree)\n"
    "  --steps N            full-batch training steps (default 1000)\n"
    "  --lr X               Adam learning rate (default 0.01)\n"
    "  --checkpoint-dir DIR checkpoints (default ./runnel-iris); --resume continues\n"
    "  --save-every N       steps between checkpoints (default 500)\n"
    "  --csv FILE, --plot FILE   loss/accuracy curves\n"
    "  --logdir DIR         TensorBoard logs (graph, loss and accuracy curves)\n"
    "  --predict ROWS       flowers to classify: \"sl,sw,pl,pw;sl,sw,pl,pw\"\n"
    "                       (default: the three examples of TensorFlow's tutorial)\n"
    "  --min-accuracy A     exit with status 3 unless test accuracy >= A and the loss fell\n";

struct table {
  std::vector<float> features; // rows × 4
  std::vector<int32_t> labels;
};

result<table> read_table(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return not_found("cannot open " + path);
  table t;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (number == 1 || line.empty())
      continue; // header
    std::stringstream ss(line);
    std::string cell;
    std::vector<std::string> cells;
    while (std::getline(ss, cell, ','))
      cells.push_back(cell);
    if (cells.size() != 5)
      return data_loss(path + ":" + std::to_string(number) + ": expected 5 columns, found " +
                       std::to_string(cells.size()));
    for (int i = 0; i < 4; ++i) {
      char* end = nullptr;
      float v = std::strtof(cells[size_t(i)].c_str(), &end);
      if (cells[size_t(i)].empty() || *end)
        return data_loss(path + ":" + std::to_string(number) + ": column " + std::to_string(i + 1) +
                         " is not a number: '" + cells[size_t(i)] + "'");
      t.features.push_back(v);
    }
    auto it = std::find(std::begin(species), std::end(species), cells[4]);
    if (it == std::end(species))
      return data_loss(path + ":" + std::to_string(number) + ": unknown species '" + cells[4] +
                       "'");
    t.labels.push_back(int32_t(it - std::begin(species)));
  }
  if (t.labels.size() < 10)
    return data_loss(path + ": too few rows (" + std::to_string(t.labels.size()) + ")");
  return t;
}

result<tensor> parse_rows(const std::string& text) {
  std::vector<float> values;
  std::stringstream rows(text);
  std::string row;
  int64_t n = 0;
  while (std::getline(rows, row, ';')) {
    std::stringstream cols(row);
    std::string c;
    int k = 0;
    while (std::getline(cols, c, ',')) {
      char* end = nullptr;
      float v = std::strtof(c.c_str(), &end);
      if (c.empty() || *end)
        return invalid_argument("--predict: '" + c + "' is not a number");
      values.push_back(v);
      ++k;
    }
    if (k != 4)
      return invalid_argument("--predict: each flower needs 4 numbers, got " + std::to_string(k) +
                              " in '" + row + "'");
    ++n;
  }
  return tensor::from_values<float>({n, 4}, values);
}

int run(const flags& f) {
  auto data = f.get("data", std::string(RUNNEL_SOURCE_DIR) + "/apps/train/data/iris.csv");
  int64_t steps = f.get_int("steps", 1000).value();
  double lr = f.get_double("lr", 0.01).value();
  double min_accuracy = f.get_double("min-accuracy", -1).value();
  auto ckpt_dir = f.get("checkpoint-dir", "runnel-iris");
  int64_t save_every = f.get_int("save-every", 500).value();
  if (save_every <= 0)
    throw error(invalid_argument("--save-every must be positive"));
  auto t = read_table(data).value();
  int64_t rows = int64_t(t.labels.size());
  // The classic split: 120 rows to train, 30 to test, shuffled with a fixed seed.
  std::vector<int64_t> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  int64_t n_train = rows * 4 / 5;
  auto all_x = tensor::from_values<float>({rows, 4}, t.features);
  auto all_y = tensor::vector<int32_t>(t.labels);
  auto train_x = gather_rows(all_x, order, 0, n_train),
       train_y = gather_rows(all_y, order, 0, n_train);
  auto test_x = gather_rows(all_x, order, n_train, rows),
       test_y = gather_rows(all_y, order, n_train, rows);

  graph g;
  g.set_seed(3);
  auto x = placeholder(g, dtype::f32, shape{-1, 4}, "features");
  auto y = placeholder(g, dtype::i32, shape{-1}, "labels");
  output h = x;
  int64_t width = 4;
  for (int layer = 0; layer < 2; ++layer) {
    auto s = g.name_scope("hidden" + std::to_string(layer));
    auto w = variable(g, truncated_normal(g, {width, 10}, 0.3), "weights");
    auto b = variable(g, zeros(g, dtype::f32, {10}), "biases");
    h = relu(bias_add(matmul(h, w), b));
    width = 10;
  }
  output logits;
  {
    auto s = g.name_scope("logits");
    auto w = variable(g, truncated_normal(g, {10, 3}, 0.3), "weights");
    auto b = variable(g, zeros(g, dtype::f32, {3}), "biases");
    logits = bias_add(matmul(h, w), b);
  }
  auto probabilities = softmax(logits, "probabilities");
  auto loss = mean(sparse_softmax_cross_entropy_with_logits(logits, y).first);
  auto accuracy = mean(cast(equal(cast(argmax(logits, 1), dtype::i32), y), dtype::f32));
  auto step = variable(g, constant(g, int64_t(0)), "global_step", false);
  adam_optimizer opt(lr);
  auto train = opt.minimize(loss, {}, &step);
  saver sv(g, {}, {.max_to_keep = 2});
  auto init = global_variables_initializer(g);

  runtime rt;
  session s(rt, g);
  training_log log(f.get("logdir", ""));
  log.graph(g);
  int64_t done = 0;
  auto latest =
      f.has("resume") ? saver::latest_checkpoint(ckpt_dir) : result<std::string>(not_found(""));
  if (latest) {
    throw_if_error(sv.restore(s, *latest));
    done = read_checkpoint_global_step(*latest).value().value_or(0);
    std::fprintf(stderr, "resumed from %s (step %lld)\n", latest->c_str(),
                 static_cast<long long>(done));
  } else {
    throw_if_error(s.run({init}));
  }
  feed_list train_feed{{x, train_x}, {y, train_y}};
  std::vector<curve_point> curve;
  progress_line progress(steps, 1);
  double first_loss = -1, last_loss = 0;
  std::string path;
  for (; done < steps; ++done) {
    auto r = s.run(train_feed, {loss, accuracy}, {train}).value();
    last_loss = *r[0].data<float>();
    if (first_loss < 0)
      first_loss = last_loss;
    progress.update(1, done + 1, last_loss, *r[1].data<float>(), (done + 1) * n_train);
    if ((done + 1) % 50 == 0 || done + 1 == steps) {
      double test_acc = *s.run({{x, test_x}, {y, test_y}}, {accuracy}).value()[0].data<float>();
      curve.push_back({1, done + 1, last_loss, *r[1].data<float>(), test_acc});
      log.scalar("train/loss", last_loss, done + 1);
      log.scalar("train/accuracy", *r[1].data<float>(), done + 1);
      log.scalar("test/accuracy", test_acc, done + 1);
    }
    if ((done + 1) % save_every == 0 || done + 1 == steps)
      path = sv.save(s, ckpt_dir + "/iris", done + 1).value();
  }
  progress.finish();
  double test_acc = *s.run({{x, test_x}, {y, test_y}}, {accuracy}).value()[0].data<float>();
  log.close();
  if (f.has("csv"))
    throw_if_error(write_curve_csv(f.get("csv", ""), curve));
  if (f.has("plot"))
    throw_if_error(write_curve_svg(f.get("plot", ""), "Iris DNN 4-10-10-3", curve));

  auto flowers =
      parse_rows(f.get("predict", "5.1,3.3,1.7,0.5;5.9,3.0,4.2,1.5;6.9,3.1,5.4,2.1")).value();
  auto p = s.run({{x, flowers}}, {probabilities}).value()[0];
  std::printf("predictions:\n");
  for (int64_t i = 0; i < flowers.dim(0); ++i) {
    const float* row = p.data<float>() + i * 3;
    int best = int(std::max_element(row, row + 3) - row);
    std::printf("  [%g, %g, %g, %g] -> %s (p = %.3f; %s %.3f, %s %.3f, %s %.3f)\n",
                flowers.data<float>()[i * 4], flowers.data<float>()[i * 4 + 1],
                flowers.data<float>()[i * 4 + 2], flowers.data<float>()[i * 4 + 3], species[best],
                row[best], species[0], row[0], species[1], row[1], species[2], row[2]);
  }
  if (!path.empty())
    std::printf("checkpoint: %s\n", path.c_str());
  std::printf("test accuracy: %.4f\n", test_acc);
  if (min_accuracy >= 0 &&
      (test_acc < min_accuracy || (first_loss >= 0 && !(last_loss < first_loss)))) {
    std::fprintf(stderr, "FAILED: test accuracy %.4f (need %.4f), loss %.4f -> %.4f\n", test_acc,
                 min_accuracy, first_loss, last_loss);
    return 3;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return app_main(
      "iris", argc, argv, usage,
      {"data", "steps", "lr", "checkpoint-dir", "save-every", "resume", "csv", "plot", "logdir", "predict", "min-accuracy"},
      run);
}
