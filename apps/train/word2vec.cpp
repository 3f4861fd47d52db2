// word2vec: skip-gram word vectors trained with noise-contrastive estimation on public-domain
// books shipped by Debian. The corpus becomes token-id record files once; each epoch reads them
// through a dataset that subsamples frequent words and makes (centre, context) pairs on two
// actors. Prints nearest neighbours of chosen words and saves the vectors in word2vec's text
// format.
//
//   word2vec [--corpus a.txt,b.txt] [--epochs 5] [--dim 100] [--window 5] [--negatives 64]
//            [--neighbours whale,ship,...] [--out vectors.txt] [--resume] [--check]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "runnel/actors/data/dataset.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/apps/support/app_support.hpp"
#include "runnel/apps/support/training_log.hpp"
#include "runnel/apps/train/text/corpus.hpp"
#include "runnel/apps/train/text/training.hpp"
#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/ops/layers/sampled_losses.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/example.hpp"

using namespace runnel;
using namespace runnel::apps;

namespace {

const char* usage =
    "usage: word2vec [options]\n"
    "Trains skip-gram word vectors with NCE on plain-text books.\n"
    "  --corpus F[,F...]        text files (default: Moby Dick and Sherlock Holmes from Debian's\n"
    "                           golang-github-colinmarc-hdfs-dev and "
    "golang-github-jdkato-prose-dev)\n"
    "  --min-count N            drop words seen fewer times (default 5)\n"
    "  --dim N                  vector size (default 100)\n"
    "  --window N               largest distance of a context word (default 5; each position\n"
    "                           draws its own window in [1, N], as word2vec)\n"
    "  --method M               fused (default): TensorFlow's NegTrain kernel, negative sampling\n"
    "                           per pair with a linearly decaying learning rate, as TensorFlow's\n"
    "                           optimized word2vec and the original train; nce: the graph of ops\n"
    "                           (nce_loss over lookups, Adagrad, sparse updates), slower\n"
    "  --threads N              fused: threads updating the tables at once, without locks\n"
    "                           (default: one per core; 1 makes runs reproducible)\n"
    "  --negatives N            nce: sampled classes per step (default 64); fused: negatives per\n"
    "                           pair (default 5); both drawn from counts^0.75\n"
    "  --subsample T            word2vec's subsampling threshold (default 1e-3; 0: off)\n"
    "  --words-per-step N       corpus words per training step (default 1024 fused, 256 nce)\n"
    "  --epochs N               passes over the corpus (default 5)\n"
    "  --lr X                   nce: Adagrad's learning rate (default 0.5); fused: the starting\n"
    "                           rate, decaying linearly to 1e-4 of it (default 0.025)\n"
    "  --max-steps N            stop after N steps in all\n"
    "  --seed N                 seed of initialisation, subsampling and windows (default 1)\n"
    "  --records-dir D          where the corpus records go (default runnel-word2vec-records)\n"
    "  --checkpoint-dir D       checkpoints, one per epoch (default runnel-word2vec)\n"
    "  --logdir DIR             TensorBoard logs (graph, loss curve)\n"
    "  --resume                 continue from the newest checkpoint there\n"
    "  --neighbours W[,W...]    words whose nearest neighbours to print at the end\n"
    "                           (default whale,ship,captain,sea,holmes,watson,night,eyes)\n"
    "  --out F                  vectors in word2vec's text format (default <checkpoint-dir>/\n"
    "                           vectors.txt)\n"
    "  --trace F                write a Chrome trace of one training step to F\n"
    "  --check                  exit 3 unless the loss of the last quarter of the steps (at most\n"
    "                           100) is below 0.9x the first's (a smoke test that training "
    "works)\n";

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty())
      out.push_back(item);
  return out;
}

/// The dataset's map: one record of ids -> (centres [n], contexts [n, 1]) with subsampling and
/// word2vec's dynamic window, seeded by the epoch and the record's position in the file.
map_fn skipgram_pairs(std::shared_ptr<const std::vector<double>> keep_prob, int64_t window,
                      uint64_t seed) {
  return [=](element e) -> result<element> {
    RUNNEL_ASSIGN_OR_RETURN(auto features, decode_example(*e.at(0).data<std::string>()));
    auto it = features.find("ids");
    if (it == features.end() || it->second.kind != feature_kind::int64s)
      return invalid_argument("a corpus record has no int64 feature 'ids'");
    const auto& ids = it->second.int64s;
    uint64_t h = seed;
    for (size_t i = 0; i < std::min<size_t>(ids.size(), 8); ++i)
      h = h * 1000003u + uint64_t(ids[i]);
    std::mt19937_64 rng(h ^ ids.size());
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<int64_t> kept;
    for (int64_t id : ids) {
      if (id < 0 || id >= int64_t(keep_prob->size()))
        return invalid_argument("a corpus record holds id " + std::to_string(id) +
                                " outside the vocabulary of " + std::to_string(keep_prob->size()));
      if (u(rng) < (*keep_prob)[size_t(id)])
        kept.push_back(id);
    }
    std::vector<int64_t> centres, contexts;
    for (int64_t i = 0; i < int64_t(kept.size()); ++i) {
      int64_t b = 1 + int64_t(rng() % uint64_t(window));
      for (int64_t j = std::max<int64_t>(0, i - b); j <= std::min<int64_t>(kept.size() - 1, i + b);
           ++j)
        if (j != i) {
          centres.push_back(kept[size_t(i)]);
          contexts.push_back(kept[size_t(j)]);
        }
    }
    auto n = int64_t(centres.size());
    return element{tensor::vector<int64_t>(std::move(centres)),
                   tensor::from_values<int64_t>(shape{n, 1}, std::move(contexts))};
  };
}

/// Rows of `vectors` scaled to unit length.
std::vector<float> normalized(const tensor& vectors) {
  int64_t n = vectors.dim(0), d = vectors.dim(1);
  std::vector<float> out(vectors.flat<float>().begin(), vectors.flat<float>().end());
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t k = 0; k < d; ++k)
      s += double(out[size_t(i * d + k)]) * out[size_t(i * d + k)];
    float inv = s > 0 ? float(1.0 / std::sqrt(s)) : 0.0f;
    for (int64_t k = 0; k < d; ++k)
      out[size_t(i * d + k)] *= inv;
  }
  return out;
}

void print_neighbours(const vocabulary& v, const tensor& vectors,
                      const std::vector<std::string>& words) {
  auto unit = normalized(vectors);
  int64_t n = vectors.dim(0), d = vectors.dim(1);
  for (auto& w : words) {
    int64_t id = v.find(w);
    if (id < 0) {
      std::printf("%-10s (not in the vocabulary)\n", w.c_str());
      continue;
    }
    std::vector<std::pair<float, int64_t>> sims;
    for (int64_t j = 0; j < n; ++j) {
      if (j == id)
        continue;
      float s = 0;
      for (int64_t k = 0; k < d; ++k)
        s += unit[size_t(id * d + k)] * unit[size_t(j * d + k)];
      sims.emplace_back(s, j);
    }
    auto top = std::min<size_t>(8, sims.size());
    std::partial_sort(sims.begin(), sims.begin() + long(top), sims.end(), std::greater<>());
    std::printf("%-10s", w.c_str());
    for (size_t k = 0; k < top; ++k)
      std::printf(" %s (%.2f)", v.words[size_t(sims[k].second)].c_str(), sims[k].first);
    std::printf("\n");
  }
}

status write_vectors(const std::string& path, const vocabulary& v, const tensor& vectors) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path().empty()
                                          ? "."
                                          : std::filesystem::path(path).parent_path());
  std::FILE* f = std::fopen((path + ".tmp").c_str(), "w");
  if (!f)
    return not_found("cannot write " + path);
  int64_t d = vectors.dim(1);
  std::fprintf(f, "%lld %lld\n", static_cast<long long>(v.size()), static_cast<long long>(d));
  const float* p = vectors.data<float>();
  for (int64_t i = 0; i < v.size(); ++i) {
    std::fputs(v.words[size_t(i)].c_str(), f);
    for (int64_t k = 0; k < d; ++k)
      std::fprintf(f, " %.6g", p[i * d + k]);
    std::fputc('\n', f);
  }
  if (std::fclose(f) != 0 || std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
    return data_loss("cannot write " + path);
  return {};
}

/// The corpus's word ids as record files of `chunk` words, written once per corpus and
/// settings (their fingerprint in the file's name).
std::string write_corpus_records(const std::vector<std::string>& files,
                                 const std::vector<int64_t>& ids, int64_t min_count, int64_t chunk,
                                 const std::string& records_dir) {
  std::vector<std::string> fp_parts{std::to_string(min_count), std::to_string(chunk)};
  for (auto& file : files)
    fp_parts.push_back(file + ":" + std::to_string(std::filesystem::file_size(file)));
  std::filesystem::create_directories(records_dir);
  auto records = records_dir + "/corpus-" + fingerprint(fp_parts) + ".tfrecord";
  if (!std::filesystem::exists(records)) {
    std::fprintf(stderr, "writing %s ...\n", records.c_str());
    throw_if_error(write_id_records(records, ids, chunk));
  }
  return records;
}

/// word2vec's subsampling: keep a word of frequency f with probability
/// (sqrt(f / t) + 1) · t / f (capped at 1); all of them with t = 0.
std::shared_ptr<std::vector<double>> keep_probabilities(const vocabulary& vocab, int64_t words,
                                                        double subsample) {
  auto keep = std::make_shared<std::vector<double>>(size_t(vocab.size()), 1.0);
  if (subsample > 0)
    for (int64_t i = 0; i < vocab.size(); ++i) {
      double fr = double(vocab.counts[size_t(i)]) / double(words);
      (*keep)[size_t(i)] = std::min(1.0, (std::sqrt(fr / subsample) + 1) * subsample / fr);
    }
  return keep;
}

struct model_options {
  int64_t dim, negatives, threads, seed;
  bool fused; ///< word2vec's own negative-sampling update; else NCE with Adagrad
};

struct model {
  graph_variable emb;
  output lr_now, loss;
  operation train;
};

/// The embeddings and the training op over the "word2vec" iterator's (centre, context) pairs.
model build_model(graph& g, const vocabulary& vocab, const model_options& o) {
  int64_t v = vocab.size(), dim = o.dim;
  model m;
  m.emb = variable(g, random_uniform(g, shape{v, dim}) * (1.0 / double(dim)) - 0.5 / double(dim),
                   "embeddings");
  auto step = variable(g, constant(g, int64_t(0)), "global_step", false);
  auto next = iterator_get_next(g, "word2vec", {dtype::i64, dtype::i64}, {{-1}, {-1, 1}});
  auto centres = next[0], contexts = next[1];
  m.lr_now = placeholder(g, dtype::f32, shape{}, "learning_rate");
  if (o.fused) {
    // word2vec's output vectors start at zero.
    auto out_w = variable(g, zeros(g, dtype::f32, shape{v, dim}), "output_weights");
    m.loss = neg_train(m.emb, out_w, cast(centres, dtype::i32),
                       cast(reshape(contexts, std::vector<int64_t>{-1}), dtype::i32), m.lr_now,
                       vocab.counts, o.negatives, o.threads);
    auto after = g.control_dependencies({operation(m.loss)});
    m.train = operation(assign_add(step, constant(g, int64_t(1))));
    return m;
  }
  auto nce_w =
      variable(g, truncated_normal(g, shape{v, dim}, 1.0 / std::sqrt(double(dim))), "nce_weights");
  auto nce_b = variable(g, zeros(g, dtype::f32, shape{v}), "nce_biases");
  auto negatives_drawn = fixed_unigram_candidate_sampler(
      contexts, o.negatives, std::vector<double>(vocab.counts.begin(), vocab.counts.end()), 0.75, 0,
      {.seed = o.seed});
  m.loss = mean(
      nce_loss(nce_w.value, nce_b.value, contexts, embedding_lookup(m.emb.value, centres),
               {.num_sampled = o.negatives, .num_classes = v, .sampled_values = negatives_drawn}));
  adagrad_optimizer opt(m.lr_now);
  m.train = opt.minimize(m.loss, {}, &step);
  return m;
}

/// The vocabulary must hold more words than --negatives draws per example.
void check_vocabulary(const vocabulary& vocab, int64_t min_count, int64_t negatives) {
  if (vocab.size() <= negatives)
    throw error(invalid_argument("the vocabulary has " + std::to_string(vocab.size()) +
                                 " words (min count " + std::to_string(min_count) +
                                 "), not more than --negatives " + std::to_string(negatives)));
}

/// --trace: one step's timeline as Chrome trace JSON.
void write_trace(const std::string& path, const run_metadata& md) {
  std::ofstream out(path);
  out << md.to_chrome_trace();
  if (!out.flush())
    throw error(data_loss("cannot write trace file " + path));
}

/// --check: the mean loss of the last quarter of this run's steps (at most 100) must be below
/// 0.9x the first quarter's.
int check_loss(const std::vector<double>& losses) {
  auto n = std::min<size_t>(100, losses.size() / 4);
  double first = 0, last = 0;
  for (size_t i = 0; i < n; ++i) {
    first += losses[i] / double(n);
    last += losses[losses.size() - 1 - i] / double(n);
  }
  if (!(n > 0 && last < 0.9 * first)) {
    std::fprintf(stderr,
                 "FAILED: the loss of the last steps %.4f is not below 0.9x the first "
                 "steps' %.4f\n",
                 last, first);
    return 3;
  }
  std::printf("loss: first steps %.4f, last steps %.4f\n", first, last);
  return 0;
}

int run(const flags& f) {
  auto files = f.has("corpus") ? split_list(f.get("corpus", "")) : default_books();
  int64_t min_count = f.get_int("min-count", 5).value();
  int64_t dim = f.get_int("dim", 100).value();
  int64_t window = f.get_int("window", 5).value();
  auto method = f.get("method", "fused");
  if (method != "nce" && method != "fused")
    throw error(invalid_argument("--method must be nce or fused, got '" + method + "'"));
  bool fused = method == "fused";
  int64_t negatives = f.get_int("negatives", fused ? 5 : 64).value();
  int64_t threads =
      f.get_int("threads", std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency())))
          .value();
  double subsample = f.get_double("subsample", 1e-3).value();
  int64_t chunk = f.get_int("words-per-step", fused ? 1024 : 256).value();
  int epochs = int(f.get_int("epochs", 5).value());
  double lr = f.get_double("lr", fused ? 0.025 : 0.5).value();
  int64_t max_steps = f.get_int("max-steps", -1).value();
  int64_t seed = f.get_int("seed", 1).value();
  auto records_dir = f.get("records-dir", "runnel-word2vec-records");
  auto ckpt_dir = f.get("checkpoint-dir", "runnel-word2vec");
  auto out_path = f.get("out", ckpt_dir + "/vectors.txt");
  auto neighbours =
      split_list(f.get("neighbours", "whale,ship,captain,sea,holmes,watson,night,eyes"));
  if (min_count < 1 || dim < 1 || window < 1 || negatives < 1 || chunk < 2 || epochs < 1 ||
      !(lr > 0) || subsample < 0)
    throw error(invalid_argument("--min-count, --dim, --window, --negatives, --epochs and --lr "
                                 "must be positive, --words-per-step at least 2, --subsample "
                                 "not negative"));

  std::fprintf(stderr, "reading %zu corpus file(s) ...\n", files.size());
  auto words = read_words(files).value();
  auto vocab = build_vocabulary(words, min_count);
  check_vocabulary(vocab, min_count, negatives);
  auto ids = to_ids(vocab, words);
  auto records = write_corpus_records(files, ids, min_count, chunk, records_dir);
  int64_t steps_per_epoch = (int64_t(ids.size()) + chunk - 1) / chunk;
  std::fprintf(stderr,
               "%zu words, %lld kept in a vocabulary of %lld (min count %lld); %lld steps of %lld "
               "words per epoch\n",
               words.size(), static_cast<long long>(ids.size()),
               static_cast<long long>(vocab.size()), static_cast<long long>(min_count),
               static_cast<long long>(steps_per_epoch), static_cast<long long>(chunk));

  auto keep = keep_probabilities(vocab, int64_t(ids.size()), subsample);

  graph g;
  g.set_seed(seed);
  int64_t v = vocab.size();
  auto [emb, lr_now, loss, train] = build_model(
      g, vocab,
      {.dim = dim, .negatives = negatives, .threads = threads, .seed = seed, .fused = fused});
  saver sv(g, {}, {.max_to_keep = 2});
  runtime rt;
  session s(rt, g);
  training_log log(f.get("logdir", ""));
  log.graph(g);
  int64_t global_step = restore_or_initialize(s, sv, g, ckpt_dir, f.has("resume"));

  int64_t total_steps = int64_t(epochs) * steps_per_epoch;
  if (max_steps > 0)
    total_steps = std::min(total_steps, max_steps);
  progress_line progress(total_steps, epochs, "words");
  std::vector<double> losses; // this run's, for --check
  int64_t words_done = 0;
  std::string last_checkpoint;
  for (int epoch = int(global_step / steps_per_epoch); epoch < epochs && global_step < total_steps;
       ++epoch) {
    int64_t skip = global_step % steps_per_epoch;
    auto ds = dataset::records({records})
                  .skip(skip)
                  .map(skipgram_pairs(keep, window, uint64_t(seed) * 7919 + uint64_t(epoch)), 2)
                  .prefetch(8);
    throw_if_error(initialize_iterator(rt, "word2vec", ds));
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
    progress.start_epoch(global_step, words_done);
    for (int64_t b = skip; b < steps_per_epoch && global_step < total_steps; ++b) {
      run_metadata md;
      bool trace = f.has("trace") && b == skip + 20; // a step past the warm-up
      // The fused method's rate decays linearly over the run, as word2vec's.
      double rate =
          fused ? lr * std::max(1e-4, 1.0 - double(global_step) / double(total_steps)) : lr;
      auto r = s.run({{lr_now, tensor::scalar<float>(float(rate))}}, {loss}, {train},
                     {.trace = trace}, trace ? &md : nullptr);
      if (trace && r.ok())
        write_trace(f.get("trace", ""), md);
      if (!r && r.error().code() == error_code::out_of_range)
        break;
      double l = *std::move(r).value()[0].data<float>();
      if (std::isfinite(l)) { // a chunk that subsampling emptied gives NaN (mean of nothing)
        epoch_loss += l;
        ++epoch_steps;
        losses.push_back(l);
        if (global_step % 50 == 0)
          log.scalar("train/loss", l, global_step);
      }
      ++global_step;
      words_done += chunk;
      progress.update(epoch + 1, global_step, epoch_steps ? epoch_loss / double(epoch_steps) : 0,
                      -1, words_done);
    }
    progress.finish();
    log.scalar("epoch/loss", epoch_steps ? epoch_loss / double(epoch_steps) : 0.0, global_step);
    last_checkpoint = sv.save(s, ckpt_dir + "/model", global_step).value();
    std::fprintf(stderr, "epoch %d: loss %.4f -> %s (training %s at %.0f words/s)\n", epoch + 1,
                 epoch_steps ? epoch_loss / double(epoch_steps) : 0.0, last_checkpoint.c_str(),
                 format_seconds(progress.epoch_seconds()).c_str(), progress.epoch_rate());
  }
  auto vectors = s.run({}, {emb.value}).value()[0];
  print_neighbours(vocab, vectors, neighbours);
  throw_if_error(write_vectors(out_path, vocab, vectors));
  std::printf("vectors: %s (%lld words, %lld dimensions)\n", out_path.c_str(),
              static_cast<long long>(v), static_cast<long long>(dim));
  if (f.has("check"))
    return check_loss(losses);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return app_main(
      "word2vec", argc, argv, usage,
      {"corpus",         "min-count", "dim",    "window",     "negatives", "subsample",
       "words-per-step", "epochs",    "lr",     "max-steps",  "seed",      "records-dir",
       "checkpoint-dir", "resume",    "logdir", "neighbours", "out",       "check",
       "trace",          "method",    "threads"},
      run);
}
