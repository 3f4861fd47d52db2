// text_cnn: Kim's sentence CNN (convolutions of widths 3, 4 and 5 over word embeddings,
// max-over-time pooling, dropout, a softmax layer) classifying Debian's fortunes by the file
// they come from. The split (every 10th fortune held out) is written once as record files and
// read back through datasets. Embeddings may start from word2vec's text output.
//
//   text_cnn [--epochs 5] [--embeddings runnel-word2vec/vectors.txt] [--resume] [--min-accuracy A]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runnel/actors/data/dataset.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/apps/support/app_support.hpp"
#include "runnel/apps/support/training_log.hpp"
#include "runnel/apps/train/text/corpus.hpp"
#include "runnel/apps/train/text/training.hpp"
#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/layers/nn_layers.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/example.hpp"
#include "runnel/storage/record_file.hpp"

using namespace runnel;
using namespace runnel::apps;

namespace {

const char* usage =
    "usage: text_cnn [options]\n"
    "Classifies fortunes (Debian's fortunes package) by category with Kim's sentence CNN.\n"
    "  --fortunes DIR           the fortune files (default /usr/share/games/fortunes)\n"
    "  --min-per-category N     categories with at least N fortunes (default 200)\n"
    "  --max-length N           words per fortune kept (default 64)\n"
    "  --dim N                  word vector size (default 100)\n"
    "  --filters N              feature maps per width (default 100; widths 3, 4, 5)\n"
    "  --embeddings F           start word vectors from word2vec's text format (e.g. the\n"
    "                           word2vec app's vectors.txt; its dimension must equal --dim)\n"
    "  --epochs N               (default 5)\n"
    "  --batch N                (default 50)\n"
    "  --lr X                   Adam's learning rate (default 0.001)\n"
    "  --max-steps N            stop after N steps in all\n"
    "  --seed N                 (default 1)\n"
    "  --records-dir D          where the split's records go (default runnel-text-cnn-records)\n"
    "  --checkpoint-dir D       (default runnel-text-cnn)\n"
    "  --logdir DIR             TensorBoard logs (graph, loss and accuracy curves)\n"
    "  --resume                 continue from the newest checkpoint there\n"
    "  --min-accuracy A         exit 3 unless held-out accuracy >= A\n";

struct fortune {
  std::vector<std::string> words;
  int64_t label;
};

/// Fortunes of each file under `dir` with at least `min_count` of them; labels by file name.
std::pair<std::vector<fortune>, std::vector<std::string>> read_fortunes(const std::string& dir,
                                                                        int64_t min_count) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir))
    throw error(not_found("no fortunes directory " + dir +
                          " (Debian's fortunes package; scripts/setup installs it)"));
  std::vector<std::string> files;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && !e.path().has_extension())
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<fortune> all;
  std::vector<std::string> names;
  for (auto& f : files) {
    std::ifstream in(f);
    std::vector<fortune> mine;
    std::string line, text;
    auto flush = [&] {
      auto w = tokenize(text);
      if (!w.empty())
        mine.push_back({std::move(w), int64_t(names.size())});
      text.clear();
    };
    while (std::getline(in, line)) {
      if (line == "%")
        flush();
      else
        text += line + "\n";
    }
    flush();
    if (int64_t(mine.size()) >= min_count) {
      all.insert(all.end(), mine.begin(), mine.end());
      names.push_back(fs::path(f).filename().string());
    }
  }
  if (names.size() < 2)
    throw error(invalid_argument("fewer than two categories in " + dir + " have " +
                                 std::to_string(min_count) + " fortunes"));
  return {all, names};
}

/// Ids (0 = padding, 1 = unknown, then the vocabulary), padded or cut to `length`.
std::vector<int64_t> encode(const vocabulary& v, const std::vector<std::string>& words,
                            int64_t length) {
  std::vector<int64_t> ids(static_cast<size_t>(length), 0);
  for (size_t i = 0; i < words.size() && int64_t(i) < length; ++i) {
    int64_t id = v.find(words[i]);
    ids[i] = id < 0 ? 1 : id + 2;
  }
  return ids;
}

void write_split(const std::string& path, const std::vector<fortune>& items, const vocabulary& v,
                 int64_t length) {
  auto tmp = path + ".tmp";
  auto w = record_writer::open(tmp).value();
  for (auto& f : items) {
    feature ids, label;
    ids.kind = label.kind = feature_kind::int64s;
    ids.int64s = encode(v, f.words, length);
    label.int64s = {f.label};
    throw_if_error(w.write(encode_example({{"ids", ids}, {"label", label}})));
  }
  throw_if_error(w.close());
  std::filesystem::rename(tmp, path);
}

/// Word vectors from word2vec's text format into rows of `table` (ids shifted by 2).
int64_t load_vectors(const std::string& path, const vocabulary& v, tensor& table) {
  std::ifstream in(path);
  if (!in)
    throw error(not_found("cannot read embeddings file " + path));
  int64_t n = 0, d = 0, found = 0;
  std::string header;
  std::getline(in, header);
  std::istringstream hs(header);
  if (!(hs >> n >> d) || d != table.dim(1))
    throw error(invalid_argument("embeddings file " + path + ": header '" + header +
                                 "' must give a word count and dimension " +
                                 std::to_string(table.dim(1))));
  std::string line;
  for (int64_t row = 0; std::getline(in, line); ++row) {
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    std::vector<float> vec(static_cast<size_t>(d));
    for (auto& x : vec)
      if (!(ls >> x))
        throw error(invalid_argument("embeddings file " + path + ": line " +
                                     std::to_string(row + 2) + " has fewer than " +
                                     std::to_string(d) + " numbers"));
    if (int64_t id = v.find(word); id >= 0) {
      std::copy(vec.begin(), vec.end(), table.data<float>() + (id + 2) * d);
      ++found;
    }
  }
  return found;
}

/// The two splits as record files, written once per fingerprint (of the corpus and settings).
std::pair<std::string, std::string> write_records(const std::string& records_dir,
                                                  const std::vector<std::string>& fingerprint_of,
                                                  const std::vector<fortune>& train,
                                                  const std::vector<fortune>& test,
                                                  const vocabulary& vocab, int64_t length) {
  std::filesystem::create_directories(records_dir);
  auto fp = fingerprint(fingerprint_of);
  auto train_file = records_dir + "/train-" + fp + ".tfrecord";
  auto test_file = records_dir + "/test-" + fp + ".tfrecord";
  if (!std::filesystem::exists(train_file) || !std::filesystem::exists(test_file)) {
    std::fprintf(stderr, "writing %s and %s ...\n", train_file.c_str(), test_file.c_str());
    write_split(train_file, train, vocab, length);
    write_split(test_file, test, vocab, length);
  }
  return {train_file, test_file};
}

/// The embedding table's first values: small random numbers, or --embeddings' vectors for the
/// words it has; row 0 (padding) zero.
tensor initial_embeddings(const flags& f, const vocabulary& vocab, int64_t rows, int64_t dim,
                          int64_t seed) {
  tensor initial(dtype::f32, shape{rows, dim});
  uint64_t x = uint64_t(seed) * 2654435761u + 1;
  for (auto& v : initial.flat<float>()) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v = (float(x >> 40) / float(1 << 24) - 0.5f) * 0.2f;
  }
  if (f.has("embeddings")) {
    auto found = load_vectors(f.get("embeddings", ""), vocab, initial);
    std::fprintf(stderr, "embeddings: %lld of %lld words from %s\n", static_cast<long long>(found),
                 static_cast<long long>(vocab.size()), f.get("embeddings", "").c_str());
  }
  std::fill_n(initial.data<float>(), dim, 0.0f); // padding
  return initial;
}

struct cnn {
  output training; ///< bool: dropout on
  output loss;     ///< mean cross-entropy of the batch
  output correct;  ///< how many of the batch were classified right
};

/// Kim's CNN over the "fortunes" iterator's batches: convolutions of widths 3, 4 and 5 over the
/// embedded words, max-pooled over time, dropout, softmax.
cnn build_cnn(graph& g, const graph_variable& emb, int64_t length, int64_t dim, int64_t filters,
              int64_t classes) {
  auto next = iterator_get_next(g, "fortunes", {dtype::i64, dtype::i64}, {{-1, length}, {-1}});
  auto ids = next[0], labels = next[1];
  auto training = placeholder(g, dtype::boolean, shape{}, "training");
  auto words = expand_dims(embedding_lookup(emb.value, ids), -1); // [b, length, dim, 1]
  std::vector<output> pooled;
  for (int64_t width : {3, 4, 5}) {
    auto s = g.name_scope("conv" + std::to_string(width));
    auto w = variable(g, truncated_normal(g, {width, dim, 1, filters}, 0.1), "weights");
    auto b = variable(g, filled(g, dtype::f32, {filters}, 0.1), "biases");
    auto maps = relu(bias_add(conv2d(words, w, {1, 1}, "VALID"), b)); // [b, len-w+1, 1, F]
    pooled.push_back(reshape(reduce_max(maps, {1}), std::vector<int64_t>{-1, filters}));
  }
  auto features = dropout(concat(pooled, 1), 0.5, training);
  auto w_out = variable(g, truncated_normal(g, {3 * filters, classes}, 0.1), "softmax_weights");
  auto b_out = variable(g, zeros(g, dtype::f32, {classes}), "softmax_biases");
  auto logits = bias_add(matmul(features, w_out.value), b_out.value);
  auto loss = mean(sparse_softmax_cross_entropy_with_logits(logits, labels).first);
  auto correct = sum(cast(equal(argmax(logits, 1), labels), dtype::f32));
  return {training, loss, correct};
}

/// The share of the held-out fortunes classified right.
double heldout_accuracy(runtime& rt, session& s, const cnn& model, const std::string& test_file,
                        const std::vector<feature_spec>& specs, int64_t examples) {
  throw_if_error(initialize_iterator(
      rt, "fortunes", dataset::records({test_file}).batch(500).parse_examples(specs)));
  double right = 0;
  for (;;) {
    auto r = s.run({{model.training, tensor::scalar<bool>(false)}}, {model.correct});
    if (!r && r.error().code() == error_code::out_of_range)
      break;
    right += *std::move(r).value()[0].data<float>();
  }
  return right / double(examples);
}

/// The share of the held-out fortunes in the largest category (what always guessing it scores).
double largest_class_share(const std::vector<fortune>& test, size_t categories) {
  std::vector<int64_t> c(categories, 0);
  for (auto& t : test)
    ++c[size_t(t.label)];
  return double(*std::max_element(c.begin(), c.end())) / double(test.size());
}

int run(const flags& f) {
  auto dir = f.get("fortunes", "/usr/share/games/fortunes");
  int64_t min_per = f.get_int("min-per-category", 200).value();
  int64_t length = f.get_int("max-length", 64).value();
  int64_t dim = f.get_int("dim", 100).value();
  int64_t filters = f.get_int("filters", 100).value();
  int epochs = int(f.get_int("epochs", 5).value());
  int64_t batch = f.get_int("batch", 50).value();
  double lr = f.get_double("lr", 0.001).value();
  int64_t max_steps = f.get_int("max-steps", -1).value();
  int64_t seed = f.get_int("seed", 1).value();
  double min_accuracy = f.get_double("min-accuracy", -1).value();
  auto records_dir = f.get("records-dir", "runnel-text-cnn-records");
  auto ckpt_dir = f.get("checkpoint-dir", "runnel-text-cnn");
  if (length < 5 || dim < 1 || filters < 1 || epochs < 1 || batch < 1 || !(lr > 0))
    throw error(invalid_argument("--max-length must be at least 5 (the widest filter); --dim, "
                                 "--filters, --epochs, --batch and --lr must be positive"));

  auto read = read_fortunes(dir, min_per);
  auto& all = read.first; // named references: lambdas below capture them
  auto& names = read.second;
  std::vector<fortune> train, test;
  for (size_t i = 0; i < all.size(); ++i)
    (i % 10 == 9 ? test : train).push_back(all[i]);
  std::vector<std::string> train_words;
  for (auto& t : train)
    train_words.insert(train_words.end(), t.words.begin(), t.words.end());
  auto vocab = build_vocabulary(train_words, 2);
  std::fprintf(stderr, "%zu fortunes in %zu categories (%zu held out); vocabulary %lld\n",
               all.size(), names.size(), test.size(), static_cast<long long>(vocab.size()));
  auto files = write_records(
      records_dir,
      {dir, std::to_string(min_per), std::to_string(length), std::to_string(all.size())}, train,
      test, vocab, length);
  auto& train_file = files.first; // named references: lambdas below capture them
  auto& test_file = files.second;

  graph g;
  g.set_seed(seed);
  int64_t rows = vocab.size() + 2, classes = int64_t(names.size());
  tensor initial = initial_embeddings(f, vocab, rows, dim, seed);
  auto emb = variable(g, constant(g, initial, "initial_embeddings"), "embeddings");
  auto model = build_cnn(g, emb, length, dim, filters, classes);
  output training = model.training, loss = model.loss;
  auto step_var = variable(g, constant(g, int64_t(0)), "global_step", false);
  adam_optimizer opt(lr);
  auto train_op = opt.minimize(loss, {}, &step_var);
  saver sv(g, {}, {.max_to_keep = 2});
  runtime rt;
  session s(rt, g);
  training_log log(f.get("logdir", ""));
  log.graph(g);
  int64_t global_step = restore_or_initialize(s, sv, g, ckpt_dir, f.has("resume"));
  std::vector<feature_spec> specs{{.key = "ids", .type = dtype::i64, .shape = {length}},
                                  {.key = "label", .type = dtype::i64, .shape = {}}};
  auto evaluate = [&] {
    return heldout_accuracy(rt, s, model, test_file, specs, int64_t(test.size()));
  };
  int64_t steps_per_epoch = (int64_t(train.size()) + batch - 1) / batch;
  int64_t total = int64_t(epochs) * steps_per_epoch;
  if (max_steps > 0)
    total = std::min(total, max_steps);
  progress_line progress(total, epochs);
  double accuracy = 0;
  for (int epoch = int(global_step / steps_per_epoch); epoch < epochs && global_step < total;
       ++epoch) {
    int64_t skip = global_step % steps_per_epoch;
    auto ds = dataset::records({train_file})
                  .shuffle(train.size(), uint64_t(seed) * 1000 + uint64_t(epoch), false)
                  .batch(batch)
                  .skip(skip)
                  .parse_examples(specs)
                  .prefetch(4);
    throw_if_error(initialize_iterator(rt, "fortunes", ds));
    double loss_sum = 0;
    int64_t n = 0;
    progress.start_epoch(global_step, global_step * batch);
    for (int64_t b = skip; b < steps_per_epoch && global_step < total; ++b) {
      auto r = s.run({{training, tensor::scalar<bool>(true)}}, {loss}, {train_op});
      if (!r && r.error().code() == error_code::out_of_range)
        break;
      loss_sum += *std::move(r).value()[0].data<float>();
      ++n;
      ++global_step;
      progress.update(epoch + 1, global_step, loss_sum / double(n), -1, global_step * batch);
      if (global_step % 20 == 0)
        log.scalar("train/loss", loss_sum / double(n), global_step);
    }
    progress.finish();
    auto eval_start = std::chrono::steady_clock::now();
    accuracy = evaluate();
    double eval_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
    log.scalar("heldout/accuracy", accuracy, global_step);
    auto ckpt = sv.save(s, ckpt_dir + "/model", global_step).value();
    std::fprintf(stderr,
                 "epoch %d: train loss %.4f, held-out accuracy %.4f -> %s (training %s at %.0f "
                 "ex/s, evaluation %s)\n",
                 epoch + 1, n ? loss_sum / double(n) : 0.0, accuracy, ckpt.c_str(),
                 format_seconds(progress.epoch_seconds()).c_str(), progress.epoch_rate(),
                 format_seconds(eval_seconds).c_str());
  }
  if (global_step == 0 || accuracy == 0)
    accuracy = evaluate();
  std::printf("held-out accuracy: %.4f (%zu categories; the largest is %.4f of the fortunes)\n",
              accuracy, names.size(), largest_class_share(test, names.size()));
  if (min_accuracy >= 0 && accuracy < min_accuracy) {
    std::fprintf(stderr, "FAILED: held-out accuracy %.4f < %.4f\n", accuracy, min_accuracy);
    return 3;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return app_main("text_cnn", argc, argv, usage,
                  {"fortunes", "min-per-category", "max-length", "dim", "filters", "embeddings",
                   "epochs", "batch", "lr", "max-steps", "seed", "records-dir", "checkpoint-dir",
                   "resume", "min-accuracy", "logdir"},
                  run);
}
