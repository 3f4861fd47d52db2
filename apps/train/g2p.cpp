// g2p: grapheme-to-phoneme translation on the CMU pronouncing dictionary (Debian's festlex-cmu):
// an encoder-decoder with attention (apps/train/g2p/g2p_model.hpp) trained with teacher forcing
// on batches bucketed by word length; word and phone error rates of greedy decoding and beam
// search on a held-out 5%; an attention map as SVG; and a frozen export whose graph decodes a
// word by itself (`runnel run runnel-g2p/g2p.pb --feed-text word=hello --fetch phonemes`).
//
//   g2p [--epochs 4] [--attention luong|bahdanau] [--beam 4] [--resume]
//   g2p --decode "hello,world" [--model runnel-g2p/g2p.pb]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "runnel/actors/data/dataset.hpp"
#include "runnel/actors/state/freeze.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/apps/support/app_support.hpp"
#include "runnel/apps/support/training_log.hpp"
#include "runnel/apps/train/device_flags.hpp"
#include "runnel/apps/train/g2p/g2p_data.hpp"
#include "runnel/apps/train/g2p/g2p_model.hpp"
#include "runnel/apps/train/g2p/g2p_report.hpp"
#include "runnel/apps/train/text/corpus.hpp"
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
    "usage: g2p [options]        train; or: g2p --decode WORD,WORD [--model F.pb]\n"
    "Grapheme-to-phoneme translation on the CMU pronouncing dictionary (festlex-cmu).\n"
    "  --dict F                 (default /usr/share/festival/dicts/cmu/cmudict-0.4.out)\n"
    "  --max-letters N          longer words are left out (default 20)\n"
    "  --embed N                letter and phone embedding width (default 64)\n"
    "  --units N                encoder LSTM width per direction; the decoder's is twice it\n"
    "                           (default 128)\n"
    "  --attention luong|bahdanau   the score (default luong)\n"
    "  --epochs N               (default 4)\n"
    "  --batch N                words per batch (default 64)\n"
    "  --lr X                   Adam's learning rate (default 0.002)\n"
    "  --clip X                 gradients clipped to this global norm (default 5)\n"
    "  --beam N                 beam width for evaluation and the export (default 4)\n"
    "  --max-steps N            stop after N steps in all\n"
    "  --test-words N           evaluate on the first N held-out words (default all)\n"
    "  --seed N                 (default 1)\n" RUNNEL_DEVICE_FLAGS_USAGE
    "  --records-dir D          (default runnel-g2p-records)\n"
    "  --checkpoint-dir D       checkpoints, g2p.pb and attention.svg (default runnel-g2p)\n"
    "  --logdir DIR             TensorBoard logs\n"
    "  --resume                 continue from the newest checkpoint there\n"
    "  --max-wer W              exit 3 unless beam search's word error rate is at most W\n"
    "  --max-per P              exit 3 unless its phone error rate is at most P\n"
    "  --decode WORDS           print the phones of each comma-separated word with the\n"
    "                           exported model (--model, default CHECKPOINT-DIR/g2p.pb)\n";

/// Row `row` of an [n, m] id tensor up to its first <eos>, at most `limit` ids.
std::vector<int64_t> row_ids(const tensor& t, int64_t row, int64_t limit) {
  std::vector<int64_t> out;
  int64_t n = t.dim(1);
  for (int64_t j = 0; j < n && j < limit; ++j) {
    int64_t v = t.data<int64_t>()[row * n + j];
    if (v == g2p_eos)
      break;
    out.push_back(v);
  }
  return out;
}

/// The exported graph's own front end: a word (string scalar) → letter ids [1, n] and [n].
std::pair<output, output> word_to_letters(graph& g, const g2p_corpus& c, output word) {
  tensor table(dtype::i64, shape{256});
  for (int i = 0; i < 256; ++i)
    table.data<int64_t>()[i] = 0;
  for (size_t k = 0; k < c.letters.size(); ++k)
    table.data<int64_t>()[static_cast<unsigned char>(c.letters[k][0])] = int64_t(k) + 1;
  auto bytes = cast(decode_raw(reshape(word, std::vector<int64_t>{1}), dtype::u8), dtype::i32);
  auto ids = gather(constant(g, table, "letter_table"), bytes); // [1, n]
  auto n = strided_slice(shape_of(ids), {1}, {2}, {1});         // [1]
  return {ids, n};
}

int decode_main(const flags& f) {
  auto model = f.get("model", f.get("checkpoint-dir", "runnel-g2p") + "/g2p.pb");
  auto g = import_tf_graph(model).value();
  runtime rt;
  session s(rt, g);
  auto words = f.get("decode", "");
  for (size_t b = 0, e; b <= words.size(); b = e + 1) {
    e = std::min(words.find(',', b), words.size());
    auto w = words.substr(b, e - b);
    auto r = s.run(named_feed_list{{"word", tensor::scalar<std::string>(w)}}, {"phonemes"});
    if (!r)
      throw error(r.error().with_context("decoding '" + w + "' with " + model));
    std::string phones;
    const tensor& t = r.value()[0];
    for (int64_t i = 0; i < t.num_elements(); ++i)
      phones += (i ? " " : "") + t.data<std::string>()[i];
    std::printf("%s\t%s\n", w.c_str(), phones.c_str());
  }
  return 0;
}

/// The record files of the corpus's two splits, written once per corpus (its fingerprint in
/// their names).
std::pair<std::string, std::string> write_records(const g2p_corpus& corpus, const std::string& dict,
                                                  int64_t max_letters,
                                                  const std::string& records_dir) {
  auto fp = fingerprint({dict, std::to_string(max_letters), std::to_string(corpus.train.size())});
  auto train_file = records_dir + "/train-" + fp + ".tfrecord";
  auto test_file = records_dir + "/test-" + fp + ".tfrecord";
  if (!std::filesystem::exists(train_file) || !std::filesystem::exists(test_file)) {
    std::filesystem::create_directories(records_dir);
    std::fprintf(stderr, "writing %s and %s ...\n", train_file.c_str(), test_file.c_str());
    throw_if_error(write_g2p_split(train_file, corpus, corpus.train));
    throw_if_error(write_g2p_split(test_file, corpus, corpus.test));
  }
  return {train_file, test_file};
}

/// The graph's three towers: training (from the "g2p_train" iterator), evaluation (greedy and
/// beam search over "g2p_eval"), and serving (one word in, "phonemes" and "phoneme_ids" out).
struct towers {
  std::vector<output> next;
  g2p_model::loss_terms terms;
  std::vector<output> ev;
  g2p_decoded greedy, searched;
  output word, phoneme_ids;
};

towers build_towers(graph& g, g2p_model& model, const g2p_corpus& corpus, int64_t beam) {
  towers t;
  const std::vector<dtype> types{dtype::i32, dtype::i64, dtype::i32, dtype::i64, dtype::i64};
  const std::vector<shape> shapes{{-1}, {-1, -1}, {-1}, {-1, -1}, {-1, -1}};
  t.next = iterator_get_next(g, "g2p_train", types, shapes);
  t.terms = model.train(model.encode(t.next[1], t.next[0]), t.next[3], t.next[4], t.next[2]);
  t.ev = iterator_get_next(g, "g2p_eval", types, shapes);
  auto ev_encoded = model.encode(t.ev[1], t.ev[0]);
  auto limit = reduce_max(t.ev[0]) * constant(g, int32_t(2)) + constant(g, int32_t(4));
  t.greedy = model.greedy(ev_encoded, limit);
  t.searched = model.beam_search(ev_encoded, beam, limit);
  // The serving tower: one word in, its phones out, beam search inside.
  t.word = placeholder(g, dtype::string, shape{}, "word");
  auto [letters, count] = word_to_letters(g, corpus, t.word);
  auto serve_encoded = model.encode(letters, cast(count, dtype::i32));
  auto serve_limit = cast(count, dtype::i32) * constant(g, int32_t(2)) + constant(g, int32_t(4));
  auto served =
      model.beam_search(serve_encoded, beam, reshape(serve_limit, std::vector<int64_t>{}));
  auto ids = reshape(served.phones, std::vector<int64_t>{-1});
  auto length = sum(cast(not_equal(ids, constant(g, int64_t(g2p_eos))), dtype::i32));
  auto kept = slice(ids, reshape(constant(g, int32_t(0)), std::vector<int64_t>{1}),
                    reshape(length, std::vector<int64_t>{1}));
  tensor names(dtype::string, shape{int64_t(corpus.phones.size())});
  for (size_t i = 0; i < corpus.phones.size(); ++i)
    names.data<std::string>()[i] = i < 2 ? "" : corpus.phones[i];
  identity(gather(constant(g, names, "phone_table"), kept), "phonemes"); // fetched by name
  t.phoneme_ids = identity(kept, "phoneme_ids");
  return t;
}

/// An attention map for a few held-out words (greedy decoding's alignments), as SVG.
void write_attention_maps(session& s, const g2p_corpus& corpus, const towers& t,
                          const std::string& path) {
  std::vector<attention_map> maps;
  for (std::string w : {"phoneme", "knight", "photograph", "thought"}) {
    auto in = g2p_letter_ids(corpus, w);
    tensor lt(dtype::i64, shape{1, int64_t(in.size())});
    std::copy(in.begin(), in.end(), lt.data<int64_t>());
    auto r = s.run({{t.ev[1], lt}, {t.ev[0], tensor::vector<int32_t>({int32_t(in.size())})}},
                   {t.greedy.phones, t.greedy.alignments})
                 .value();
    attention_map m{w, {}, {}};
    auto ids_row = row_ids(r[0], 0, r[0].dim(1));
    int64_t letters_n = r[1].dim(2);
    for (size_t i = 0; i < ids_row.size(); ++i) {
      m.phones.push_back(corpus.phones[size_t(ids_row[i])]);
      m.weights.emplace_back(r[1].data<float>() + int64_t(i) * letters_n,
                             r[1].data<float>() + int64_t(i + 1) * letters_n);
    }
    maps.push_back(std::move(m));
  }
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  throw_if_error(write_attention_svg(path, maps));
}

/// Freezes the serving tower into CKPT-DIR/g2p.pb, loads it back in a runtime of its own and
/// checks that it decodes as this session does. Returns the file's path.
std::string export_and_check(session& s, const graph& g, const towers& t,
                             const std::string& ckpt_dir) {
  graph frozen;
  freeze_stats st;
  throw_if_error(freeze_graph(s, g, {"phonemes", "phoneme_ids"}, frozen, &st));
  auto pb = ckpt_dir + "/g2p.pb";
  throw_if_error(save_tf_graph(frozen, pb));
  auto loaded = import_tf_graph(pb).value();
  runtime rt2;
  session served_s(rt2, loaded);
  for (auto& w : {"phoneme", "runnel"}) {
    auto here = s.run({{t.word, tensor::scalar<std::string>(w)}}, {t.phoneme_ids}).value()[0];
    auto there =
        served_s.run(named_feed_list{{"word", tensor::scalar<std::string>(w)}}, {"phoneme_ids"})
            .value()[0];
    if (here.values_to_string(64) != there.values_to_string(64))
      throw error(internal_error("exported " + pb + " decodes '" + w + "' as " +
                                 there.values_to_string(64) + ", the training session as " +
                                 here.values_to_string(64)));
  }
  std::fprintf(stderr, "exported %s (%d nodes, %d variables frozen); attention maps in %s\n",
               pb.c_str(), st.nodes, st.variables, (ckpt_dir + "/attention.svg").c_str());
  return pb;
}

/// Word lengths at which batches are bucketed.
const std::vector<int64_t> length_bounds{5, 7, 9, 11, 14};

/// Parsed entries in batches of `size` words of similar length.
dataset bucketed(dataset ds, int64_t size) {
  return ds.map(g2p_parse_entry())
      .bucket_by_length([](const element& e) { return int64_t(*e[0].data<int32_t>()); },
                        length_bounds, std::vector<int64_t>(length_bounds.size() + 1, size));
}

/// Greedy and beam-search error rates over the first `n_test` held-out words.
void evaluate(runtime& rt, session& s, const towers& t, const std::string& test_file,
              int64_t n_test, error_rates& greedy_rates, error_rates& beam_rates) {
  throw_if_error(initialize_iterator(
      rt, "g2p_eval", bucketed(dataset::records({test_file}).take(n_test), 256).prefetch(2)));
  for (;;) {
    auto r = s.run({}, {t.greedy.phones, t.searched.phones, t.ev[4], t.ev[2]});
    if (!r && r.error().code() == error_code::out_of_range)
      break;
    auto v = std::move(r).value();
    for (int64_t b = 0; b < v[2].dim(0); ++b) {
      auto reference = row_ids(v[2], b, v[3].data<int32_t>()[b] - 1);
      greedy_rates.add(row_ids(v[0], b, v[0].dim(1)), reference);
      beam_rates.add(row_ids(v[1], b, v[1].dim(1)), reference);
    }
  }
}

struct epoch_result {
  double loss_sum = 0;
  int64_t steps = 0;
  bool complete = false; ///< the dataset ended (not the step limit)
};

/// One epoch's training steps, until the training dataset ends or `step_limit`.
epoch_result train_steps(session& s, const towers& t, operation train_op, int epoch,
                         int64_t step_limit, int64_t& global_step, int64_t& words_done,
                         progress_line& progress, training_log& log) {
  epoch_result e;
  while (global_step < step_limit) {
    auto r = s.run({}, {t.terms.loss, t.next[0]}, {train_op});
    if (!r && r.error().code() == error_code::out_of_range) {
      e.complete = true;
      break;
    }
    auto v = std::move(r).value();
    e.loss_sum += *v[0].data<float>();
    words_done += v[1].num_elements();
    ++e.steps;
    ++global_step;
    progress.update(epoch + 1, global_step, e.loss_sum / double(e.steps), -1, words_done);
    if (global_step % 50 == 0)
      log.scalar("train/loss", e.loss_sum / double(e.steps), global_step);
  }
  return e;
}

int run(const flags& f) {
  if (f.has("decode"))
    return decode_main(f);
  auto dict = f.get("dict", "/usr/share/festival/dicts/cmu/cmudict-0.4.out");
  int64_t max_letters = f.get_int("max-letters", 20).value();
  int epochs = int(f.get_int("epochs", 4).value());
  int64_t batch = f.get_int("batch", 64).value();
  double lr = f.get_double("lr", 0.002).value();
  double clip = f.get_double("clip", 5).value();
  int64_t beam = f.get_int("beam", 4).value();
  int64_t max_steps = f.get_int("max-steps", -1).value();
  int64_t test_words = f.get_int("test-words", -1).value();
  int64_t seed = f.get_int("seed", 1).value();
  double max_wer = f.get_double("max-wer", -1).value();
  double max_per = f.get_double("max-per", -1).value();
  auto kind = f.get("attention", "luong");
  auto ckpt_dir = f.get("checkpoint-dir", "runnel-g2p");
  auto records_dir = f.get("records-dir", "runnel-g2p-records");
  if (kind != "luong" && kind != "bahdanau")
    throw error(invalid_argument("--attention must be luong or bahdanau, not '" + kind + "'"));
  if (epochs < 1 || batch < 1 || beam < 1 || !(lr > 0) || !(clip > 0))
    throw error(invalid_argument("--epochs, --batch, --beam, --lr and --clip must be positive"));

  auto corpus = read_g2p_corpus(dict, max_letters).value();
  auto [train_file, test_file] = write_records(corpus, dict, max_letters, records_dir);
  int64_t n_test = test_words > 0 ? std::min<int64_t>(test_words, int64_t(corpus.test.size()))
                                  : int64_t(corpus.test.size());
  std::fprintf(stderr, "%zu words to train on, %lld held out; %zu letters, %zu phones\n",
               corpus.train.size(), static_cast<long long>(n_test), corpus.letters.size(),
               corpus.phones.size() - 2);

  graph g;
  g.set_seed(seed);
  g2p_model model(g,
                  {.letters = int64_t(corpus.letters.size()) + 1,
                   .phones = int64_t(corpus.phones.size()),
                   .embed = f.get_int("embed", 64).value(),
                   .units = f.get_int("units", 128).value(),
                   .attention = kind == "luong" ? attention_kind::luong : attention_kind::bahdanau,
                   .seed = seed});
  auto t = build_towers(g, model, corpus, beam);
  auto step_var = variable(g, constant(g, int64_t(0)), "global_step", false);
  epoch_counter epochs_done(g); // bucketed epochs have no fixed step count
  adam_optimizer opt(lr);
  auto train_op = clipped_update(opt, t.terms.loss, clip, step_var);
  saver sv(g, {}, {.max_to_keep = 2});
  auto rt_ptr = local_training_runtime(f);
  runtime& rt = *rt_ptr;
  session s(rt, g);
  training_log log(f.get("logdir", ""));
  log.graph(g);
  int64_t global_step = restore_or_initialize(s, sv, g, ckpt_dir, f.has("resume"));
  epochs_done.load(s);

  int64_t steps_per_epoch =
      (int64_t(corpus.train.size()) + batch - 1) / batch + int64_t(length_bounds.size());
  int64_t step_limit = max_steps > 0 ? max_steps : std::numeric_limits<int64_t>::max();
  progress_line progress(std::min(int64_t(epochs) * steps_per_epoch, step_limit), epochs, "words");
  error_rates greedy_rates, beam_rates;
  bool evaluated = false;
  int64_t words_done = 0;
  for (int epoch = epochs_done.epochs_done(); epoch < epochs && global_step < step_limit; ++epoch) {
    int64_t skip = global_step - epochs_done.epoch_start(); // resuming inside an epoch
    auto ds =
        bucketed(dataset::records({train_file})
                     .shuffle(corpus.train.size(), uint64_t(seed) * 1000 + uint64_t(epoch), false),
                 batch)
            .skip(skip)
            .prefetch(8);
    throw_if_error(initialize_iterator(rt, "g2p_train", ds));
    progress.start_epoch(global_step, words_done);
    auto [loss_sum, n, complete] =
        train_steps(s, t, train_op, epoch, step_limit, global_step, words_done, progress, log);
    progress.finish();
    if (complete)
      epochs_done.finish_epoch(s, global_step);
    double seconds = progress.epoch_seconds();
    auto eval_start = std::chrono::steady_clock::now();
    greedy_rates = beam_rates = {};
    evaluate(rt, s, t, test_file, n_test, greedy_rates, beam_rates);
    evaluated = true;
    double eval_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
    log.scalar("test/wer_beam", beam_rates.wer(), global_step);
    log.scalar("test/per_beam", beam_rates.per(), global_step);
    log.scalar("test/wer_greedy", greedy_rates.wer(), global_step);
    auto ckpt = sv.save(s, ckpt_dir + "/model", global_step).value();
    std::fprintf(stderr,
                 "epoch %d: loss %.4f; held-out WER %.2f%% PER %.2f%% (beam %lld), WER %.2f%% PER "
                 "%.2f%% (greedy) -> %s (training %s at %.0f words/s, evaluation %s)\n",
                 epoch + 1, n ? loss_sum / double(n) : 0.0, 100 * beam_rates.wer(),
                 100 * beam_rates.per(), static_cast<long long>(beam), 100 * greedy_rates.wer(),
                 100 * greedy_rates.per(), ckpt.c_str(), format_seconds(seconds).c_str(),
                 progress.epoch_rate(), format_seconds(eval_seconds).c_str());
  }
  if (!evaluated)
    evaluate(rt, s, t, test_file, n_test, greedy_rates, beam_rates);

  write_attention_maps(s, corpus, t, ckpt_dir + "/attention.svg");
  auto pb = export_and_check(s, g, t, ckpt_dir);
  std::printf("held-out words: %lld\nbeam search (width %lld): WER %.2f%% PER %.2f%%\n"
              "greedy: WER %.2f%% PER %.2f%%\nexported: %s\n",
              static_cast<long long>(beam_rates.words), static_cast<long long>(beam),
              100 * beam_rates.wer(), 100 * beam_rates.per(), 100 * greedy_rates.wer(),
              100 * greedy_rates.per(), pb.c_str());
  if ((max_wer >= 0 && !(beam_rates.wer() <= max_wer)) ||
      (max_per >= 0 && !(beam_rates.per() <= max_per))) {
    std::fprintf(stderr, "FAILED: WER %.4f (at most %.4f wanted), PER %.4f (at most %.4f)\n",
                 beam_rates.wer(), max_wer, beam_rates.per(), max_per);
    return 3;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return app_main("g2p", argc, argv, usage,
                  {"dict",        "max-letters",    "embed",  "units",  "attention",
                   "epochs",      "batch",          "lr",     "clip",   "beam",
                   "max-steps",   "test-words",     "seed",   "device", "simulated-gpus",
                   "records-dir", "checkpoint-dir", "logdir", "resume", "max-wer",
                   "max-per",     "decode",         "model"},
                  run);
}
