// lm: a word-level LSTM language model on the Debian-packaged books (apps/train/lm/lm_data.hpp:
// split by chapter, a 10k vocabulary with <unk>), trained on whole sentences (cut at --max-words)
// in batches of similar lengths from length-bucketing queues, with dropout, gradient clipping
// and sampled softmax; validation and test perplexity with the full softmax after every epoch.
// The trained model is exported frozen (variables as constants) for `runnel run` and the C++
// API, and `lm --score` scores sentences with it.
//
//   lm [--epochs 6] [--input bucket|queue|padded] [--resume] [--logdir DIR]
//   lm --score "call me ishmael" [--model runnel-lm/lm.pb]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "runnel/actors/data/batching.hpp"
#include "runnel/actors/data/dataset.hpp"
#include "runnel/actors/state/freeze.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/apps/support/app_support.hpp"
#include "runnel/apps/support/training_log.hpp"
#include "runnel/apps/train/device_flags.hpp"
#include "runnel/apps/train/lm/lm_data.hpp"
#include "runnel/apps/train/lm/lm_model.hpp"
#include "runnel/apps/train/lm/lm_serving.hpp"
#include "runnel/apps/train/text/training.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/storage/example_parse.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

using namespace runnel;
using namespace runnel::apps;

namespace {

const char* usage =
    "usage: lm [options]        train; or: lm --score TEXT [--model F.pb]\n"
    "A word-level LSTM language model on Debian's packaged books (Moby Dick, Sherlock Holmes).\n"
    "  --books F,F              plain-text books (default: the two above)\n"
    "  --vocab N                vocabulary size with <eos> and <unk> (default 10000)\n"
    "  --max-words N            longer sentences are cut into pieces of N words (default 50)\n"
    "  --dim N                  embedding and LSTM width (default 200)\n"
    "  --layers N               stacked LSTMs (default 1)\n"
    "  --keep-prob P            dropout keep probability (default 0.5)\n"
    "  --num-sampled N          sampled softmax's classes per step (default 512)\n"
    "  --epochs N               (default 6)\n"
    "  --batch N                sentences per batch (default 64)\n"
    "  --lr X                   Adam's learning rate (default 0.002)\n"
    "  --clip X                 gradients clipped to this global norm (default 5)\n"
    "  --input bucket|queue|padded\n"
    "                           bucket: a dataset bucketing by length (default); queue: queue\n"
    "                           actors (bucket_by_sequence_length) fed by a record reader;\n"
    "                           padded: batches padded to the longest sentence possible\n"
    "  --boundaries A,B,...     bucket boundaries in tokens (default 8,12,16,20,25,32,40)\n"
    "  --max-steps N            stop after N steps in all\n"
    "  --seed N                 (default 1)\n" RUNNEL_DEVICE_FLAGS_USAGE
    "  --records-dir D          where the split's records go (default runnel-lm-records)\n"
    "  --checkpoint-dir D       checkpoints and the exported lm.pb (default runnel-lm)\n"
    "  --logdir DIR             TensorBoard logs (graph, loss and perplexity curves)\n"
    "  --resume                 continue from the newest checkpoint there\n"
    "  --max-perplexity P       exit 3 unless the test perplexity is at most P\n"
    "  --score TEXT             print each '|'-separated sentence's log-probability and\n"
    "                           perplexity under the exported model (--model, default\n"
    "                           CHECKPOINT-DIR/lm.pb, with its lm.vocab beside it)\n";

std::vector<int64_t> parse_ints(const std::string& s, const char* what) {
  std::vector<int64_t> out;
  size_t begin = 0;
  while (begin <= s.size()) {
    size_t end = s.find(',', begin);
    if (end == std::string::npos)
      end = s.size();
    auto part = s.substr(begin, end - begin);
    char* stop = nullptr;
    long long v = std::strtoll(part.c_str(), &stop, 10);
    if (part.empty() || *stop != '\0' || v < 1)
      throw error(
          invalid_argument(std::string(what) + ": '" + part + "' is not a positive integer"));
    out.push_back(v);
    begin = end + 1;
  }
  return out;
}

struct split_files {
  std::string train, valid, test, vocab;
  int64_t train_sentences = 0, train_tokens = 0;
};

/// Reads the books and writes the split's records once (named after what they came from).
split_files prepare_data(const flags& f, int64_t vocab_size, int64_t max_words) {
  std::vector<std::string> books = default_books();
  if (f.has("books")) {
    books.clear();
    auto list = f.get("books", "");
    for (size_t b = 0, e; b <= list.size(); b = e + 1) {
      e = std::min(list.find(',', b), list.size());
      books.push_back(list.substr(b, e - b));
    }
  }
  auto dir = f.get("records-dir", "runnel-lm-records");
  std::vector<std::string> key = books;
  key.push_back(std::to_string(vocab_size));
  key.push_back(std::to_string(max_words));
  auto fp = fingerprint(key);
  split_files files{dir + "/train-" + fp + ".tfrecord", dir + "/valid-" + fp + ".tfrecord",
                    dir + "/test-" + fp + ".tfrecord", dir + "/vocab-" + fp + ".txt"};
  auto corpus = read_lm_corpus(books, max_words).value();
  for (auto& s : corpus.train.sentences)
    files.train_tokens += int64_t(s.size()) + 1;
  files.train_sentences = int64_t(corpus.train.sentences.size());
  if (!std::filesystem::exists(files.train) || !std::filesystem::exists(files.vocab)) {
    std::filesystem::create_directories(dir);
    auto vocab = lm_vocabulary(corpus.train, vocab_size);
    std::fprintf(stderr, "writing %s/{train,valid,test}-%s.{tfrecord,ids} ...\n", dir.c_str(),
                 fp.c_str());
    const std::pair<const lm_split*, std::string> splits[] = {
        {&corpus.train, files.train}, {&corpus.valid, files.valid}, {&corpus.test, files.test}};
    for (auto& [split, path] : splits)
      throw_if_error(
          write_lm_split(path, path.substr(0, path.size() - 9) + ".ids", lm_encode(vocab, *split)));
    throw_if_error(write_vocabulary_file(files.vocab, vocab));
  }
  std::fprintf(stderr,
               "books: %zu; chapters %lld train, %lld valid, %lld test; sentences %zu / %zu / "
               "%zu; %lld training tokens (with <eos>)\n",
               books.size(), static_cast<long long>(corpus.train.chapters),
               static_cast<long long>(corpus.valid.chapters),
               static_cast<long long>(corpus.test.chapters), corpus.train.sentences.size(),
               corpus.valid.sentences.size(), corpus.test.sentences.size(),
               static_cast<long long>(files.train_tokens));
  return files;
}

/// Evaluation data in batches of similar lengths and about `positions` positions each: the full
/// softmax's [positions, vocabulary] logits are the cost, so they are padded little and kept
/// small (40 MB at 10k words). With 256 sentences a batch, padded to the longest, a third of
/// the evaluation was the kernel zeroing fresh pages for them (perf), and it took 38 s, not 13.
dataset eval_data(const std::string& file, int64_t positions, int64_t max_words) {
  std::vector<int64_t> bounds{8, 12, 16, 20, 25, 32, 40}, sizes;
  for (size_t i = 0; i <= bounds.size(); ++i)
    sizes.push_back(
        std::max<int64_t>(1, positions / (i < bounds.size() ? bounds[i] : max_words + 1)));
  return dataset::records({file})
      .map(lm_parse_sentence())
      .bucket_by_length([](const element& e) { return int64_t(*e[0].data<int32_t>()); }, bounds,
                        sizes)
      .prefetch(2);
}

/// The training batches: from the "lm_train" dataset iterator, or (--input queue) from
/// bucketing queues fed by the "lm_records" iterator, whose runners go to `runners`.
std::vector<output> training_inputs(graph& g, const std::string& input,
                                    const std::vector<int64_t>& boundaries, int64_t batch,
                                    std::vector<queue_runner>& runners) {
  if (input != "queue")
    return iterator_get_next(g, "lm_train", {dtype::i32, dtype::i64, dtype::i64},
                             {{-1}, {-1, -1}, {-1, -1}});
  auto record = iterator_get_next(g, "lm_records", {dtype::string}, {{}})[0];
  auto parsed = parse_single_sequence_example(record, {}, lm_sequence_specs(), "parse");
  auto eos = constant(g, tensor::vector<int64_t>({lm_eos}));
  auto inputs = concat({eos, parsed[0]}, 0), targets = concat({parsed[0], eos}, 0);
  auto length = cast(parsed[1] + int64_t(1), dtype::i32);
  auto b = bucket_by_sequence_length(
      length, {inputs, targets}, boundaries, std::vector<int64_t>(boundaries.size() + 1, batch),
      {.capacity = 4 * batch, .allow_smaller_final_batch = true, .name = "bucket"});
  runners = b.runners;
  return {cast(b.tensors[0], dtype::i32), b.tensors[1], b.tensors[2]};
}

/// The perplexity of the sentences in `file`.
double evaluate_perplexity(runtime& rt, session& s, const lm_tower& eval, const std::string& file,
                           int64_t max_words) {
  throw_if_error(initialize_iterator(rt, "lm_eval", eval_data(file, 1024, max_words)));
  double nll = 0, tokens = 0;
  for (;;) {
    auto r = s.run({}, {eval.nll_sum, eval.tokens});
    if (!r && r.error().code() == error_code::out_of_range)
      break;
    auto v = std::move(r).value();
    nll += *v[0].data<float>();
    tokens += *v[1].data<float>();
  }
  return std::exp(nll / tokens);
}

/// An epoch's training data, shuffled by a seed of the epoch: bucketed by length, or padded.
dataset train_data(const split_files& files, int epoch, int64_t seed, const std::string& input,
                   int64_t batch, int64_t max_words, const std::vector<int64_t>& boundaries) {
  auto ds =
      dataset::records({files.train})
          .shuffle(size_t(files.train_sentences), uint64_t(seed) * 1000 + uint64_t(epoch), false)
          .map(lm_parse_sentence());
  if (input == "padded")
    return ds.padded_batch(batch, {shape{}, shape{max_words + 1}, shape{max_words + 1}});
  return ds.bucket_by_length([](const element& e) { return int64_t(*e[0].data<int32_t>()); },
                             boundaries, std::vector<int64_t>(boundaries.size() + 1, batch));
}

/// What a training step runs.
struct train_step {
  session& s;
  const lm_tower& train;
  output training, computed;
  const std::vector<output>& next;
  operation train_op;
};

struct epoch_result {
  double loss_sum = 0, real = 0, all = 0; ///< sampled loss; real and computed positions
  int64_t steps = 0, sentences = 0;
  bool complete = false; ///< the epoch's data ended (not the step limit)
  bool ended = false;    ///< the queue form's reader ended: no more epochs
};

/// One epoch's steps. A dataset's epoch ends when its data does; the queue form's after
/// `queue_sentences` sentences (the reader runs on over the epochs; -1: a dataset).
epoch_result train_steps(const train_step& t, int epoch, int64_t limit, int64_t queue_sentences,
                         int64_t& global_step, int64_t& tokens_done, progress_line& progress,
                         training_log& log) {
  epoch_result e;
  while (global_step < limit && (queue_sentences < 0 || e.sentences < queue_sentences)) {
    auto r = t.s.run({{t.training, tensor::scalar<bool>(true)}},
                     {t.train.loss, t.train.tokens, t.computed, t.next[0]}, {t.train_op});
    if (!r && r.error().code() == error_code::out_of_range) {
      e.complete = true;
      e.ended = queue_sentences >= 0;
      break;
    }
    auto v = std::move(r).value();
    e.loss_sum += *v[0].data<float>();
    e.real += *v[1].data<float>();
    e.all += *v[2].data<float>();
    e.sentences += v[3].num_elements();
    ++e.steps;
    ++global_step;
    tokens_done += int64_t(*v[1].data<float>());
    progress.update(epoch + 1, global_step, e.loss_sum / double(e.steps), -1, tokens_done);
    if (global_step % 20 == 0)
      log.scalar("train/sampled_loss", e.loss_sum / double(e.steps), global_step);
  }
  e.complete = e.complete || (queue_sentences >= 0 && e.sentences >= queue_sentences);
  return e;
}

/// The model's flags.
lm_options model_options(const flags& f, int64_t vocab_size, int64_t seed) {
  return {.vocab = vocab_size,
          .dim = f.get_int("dim", 200).value(),
          .layers = f.get_int("layers", 1).value(),
          .keep_prob = f.get_double("keep-prob", 0.5).value(),
          .num_sampled = f.get_int("num-sampled", 512).value(),
          .seed = seed};
}

/// --input queue: one reader over the epochs left (an epoch is a training set's worth of
/// sentences) and the bucketing queues' runners.
void start_queue_reader(runtime& rt, session& s, coordinator& coord,
                        std::vector<queue_runner>& runners, const split_files& files, int64_t seed,
                        int first_epoch, int epochs) {
  auto ds =
      dataset::records({files.train})
          .shuffle(size_t(files.train_sentences), uint64_t(seed) * 1000 + uint64_t(first_epoch))
          .repeat(epochs - first_epoch)
          .prefetch(256);
  throw_if_error(initialize_iterator(rt, "lm_records", ds));
  for (auto& r : runners)
    throw_if_error(r.start(s, coord));
}

int run(const flags& f) {
  if (f.has("score"))
    return score_main(f);
  int64_t vocab_size = f.get_int("vocab", 10000).value();
  int64_t max_words = f.get_int("max-words", 50).value();
  int epochs = int(f.get_int("epochs", 6).value());
  int64_t batch = f.get_int("batch", 64).value();
  double lr = f.get_double("lr", 0.002).value();
  double clip = f.get_double("clip", 5).value();
  int64_t max_steps = f.get_int("max-steps", -1).value();
  int64_t seed = f.get_int("seed", 1).value();
  double max_ppl = f.get_double("max-perplexity", -1).value();
  auto input = f.get("input", "bucket");
  auto ckpt_dir = f.get("checkpoint-dir", "runnel-lm");
  auto boundaries = parse_ints(f.get("boundaries", "8,12,16,20,25,32,40"), "--boundaries");
  if (epochs < 1 || batch < 1 || !(lr > 0) || !(clip > 0) || max_words < 1)
    throw error(invalid_argument("--epochs, --batch, --lr, --clip and --max-words must be "
                                 "positive"));
  if (input != "bucket" && input != "queue" && input != "padded")
    throw error(invalid_argument("--input must be bucket, queue or padded, not '" + input + "'"));
  auto files = prepare_data(f, vocab_size, max_words);

  graph g;
  g.set_seed(seed);
  lm_model model(g, model_options(f, vocab_size, seed));
  auto training = placeholder(g, dtype::boolean, shape{}, "training");
  // The training batches: from a dataset iterator, or from bucketing queues.
  std::vector<queue_runner> runners;
  auto next = training_inputs(g, input, boundaries, batch, runners);
  auto train = model.build(next[0], next[1], next[2], training, true);
  auto computed = cast(size(next[1]), dtype::f32); // positions computed, padding included
  auto eval_in = iterator_get_next(g, "lm_eval", {dtype::i32, dtype::i64, dtype::i64},
                                   {{-1}, {-1, -1}, {-1, -1}});
  auto eval = model.build(eval_in[0], eval_in[1], eval_in[2], {}, false);
  lm_serving_tower serve(model);
  auto step_var = variable(g, constant(g, int64_t(0)), "global_step", false);
  epoch_counter epochs_done(g); // bucketed epochs have no fixed step count
  adam_optimizer opt(lr);
  auto train_op = clipped_update(opt, train.loss, clip, step_var);
  saver sv(g, {}, {.max_to_keep = 2});
  auto rt_ptr = local_training_runtime(f);
  runtime& rt = *rt_ptr;
  session s(rt, g);
  training_log log(f.get("logdir", ""));
  log.graph(g);
  int64_t global_step = restore_or_initialize(s, sv, g, ckpt_dir, f.has("resume"));
  epochs_done.load(s);
  int first_epoch = epochs_done.epochs_done();

  auto perplexity = [&](const std::string& file) {
    return evaluate_perplexity(rt, s, eval, file, max_words);
  };
  // Bucketed epochs take a few more steps than full batches would (each bucket's last batch is
  // smaller): the estimate is for the progress line only.
  int64_t steps_per_epoch = (files.train_sentences + batch - 1) / batch +
                            (input == "padded" ? 0 : int64_t(boundaries.size()));
  int64_t limit = max_steps > 0 ? max_steps : std::numeric_limits<int64_t>::max();
  int64_t total = std::min(int64_t(epochs) * steps_per_epoch, limit);
  coordinator coord;
  if (input == "queue")
    start_queue_reader(rt, s, coord, runners, files, seed, first_epoch, epochs);
  progress_line progress(total, epochs, "tok");
  double valid_ppl = 0, test_ppl = 0;
  int64_t tokens_done = 0;
  for (int epoch = first_epoch; epoch < epochs && global_step < limit; ++epoch) {
    // Resuming inside an epoch skips the batches it trained on (the order is seeded); the
    // queue form starts the epoch's reading again.
    int64_t skip = input == "queue" ? 0 : global_step - epochs_done.epoch_start();
    if (input != "queue")
      throw_if_error(
          initialize_iterator(rt, "lm_train",
                              train_data(files, epoch, seed, input, batch, max_words, boundaries)
                                  .skip(skip)
                                  .prefetch(8)));
    progress.start_epoch(global_step, tokens_done);
    auto [loss_sum, real, all, n, sentences, complete, ended] = train_steps(
        {s, train, training, computed, next, train_op}, epoch, limit,
        input == "queue" ? files.train_sentences : -1, global_step, tokens_done, progress, log);
    progress.finish();
    if (complete)
      epochs_done.finish_epoch(s, global_step);
    double seconds = progress.epoch_seconds();
    auto eval_start = std::chrono::steady_clock::now();
    valid_ppl = perplexity(files.valid);
    test_ppl = perplexity(files.test);
    double eval_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
    log.scalar("valid/perplexity", valid_ppl, global_step);
    log.scalar("test/perplexity", test_ppl, global_step);
    auto ckpt = sv.save(s, ckpt_dir + "/model", global_step).value();
    std::fprintf(stderr,
                 "epoch %d: sampled loss %.3f, valid perplexity %.1f, test perplexity %.1f -> %s "
                 "(training %s at %.0f tokens/s, %.1f%% of computed positions padding; "
                 "evaluation %s)\n",
                 epoch + 1, n ? loss_sum / double(n) : 0.0, valid_ppl, test_ppl, ckpt.c_str(),
                 format_seconds(seconds).c_str(), seconds > 0 ? real / seconds : 0.0,
                 all > 0 ? 100.0 * (1 - real / all) : 0.0, format_seconds(eval_seconds).c_str());
    if (ended)
      break;
  }
  if (input == "queue") {
    // A reader or runner that failed (a corrupt record) closed the queues early: say so.
    coord.request_stop();
    throw_if_error(coord.join());
  }
  if (valid_ppl == 0) {
    valid_ppl = perplexity(files.valid);
    test_ppl = perplexity(files.test);
  }
  auto exported = export_lm(s, g, serve, ckpt_dir, files.vocab);
  std::printf("valid perplexity: %.2f\ntest perplexity: %.2f\nexported: %s\n", valid_ppl, test_ppl,
              exported.c_str());
  if (max_ppl > 0 && !(test_ppl <= max_ppl)) {
    std::fprintf(stderr, "FAILED: test perplexity %.2f > %.2f\n", test_ppl, max_ppl);
    return 3;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return app_main("lm", argc, argv, usage, {"books",          "vocab",
                                            "max-words",      "dim",
                                            "layers",         "keep-prob",
                                            "num-sampled",    "epochs",
                                            "batch",          "lr",
                                            "clip",           "input",
                                            "boundaries",     "max-steps",
                                            "seed",           "device",
                                            "simulated-gpus", "records-dir",
                                            "checkpoint-dir", "logdir",
                                            "resume",         "max-perplexity",
                                            "score",          "model"},
                  run);
}
