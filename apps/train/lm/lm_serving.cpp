#include "runnel/apps/train/lm/lm_serving.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "runnel/actors/state/freeze.hpp"
#include "runnel/apps/train/lm/lm_data.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

namespace runnel::apps {

lm_serving_tower::lm_serving_tower(lm_model& m) {
  graph& g = m.embedding.value.owner();
  words = placeholder(g, dtype::i64, shape{-1, -1}, "words");
  word_count = placeholder(g, dtype::i32, shape{-1}, "word_count");
  auto batch = strided_slice(shape_of(words), {0}, {1}, {1}, 0, 0, 0, 0, 1);
  // <eos> (id 0) starts each input; the zero padding after each row's words is its <eos> target.
  auto eos = fill(stack({batch, constant(g, int32_t(1))}), constant(g, lm_eos));
  auto inputs = concat({eos, words}, 1), targets = concat({words, eos}, 1);
  auto lengths = word_count + constant(g, int32_t(1));
  auto t = m.build(lengths, inputs, targets, {}, false);
  log_prob = identity(-t.sentence_nll, "sentence_log_prob");
  perplexity = identity(exp(t.sentence_nll / cast(lengths, dtype::f32)), "sentence_perplexity");
}

std::pair<tensor, tensor> lm_encode_sentences(const std::string& text,
                                              const std::vector<std::string>& vocab) {
  lm_split split;
  for (size_t b = 0, e; b <= text.size(); b = e + 1) {
    e = std::min(text.find('|', b), text.size());
    split.sentences.push_back(tokenize(text.substr(b, e - b)));
  }
  auto ids = lm_encode(vocab, split);
  size_t longest = 0;
  for (auto& s : ids)
    longest = std::max(longest, s.size());
  tensor words(dtype::i64, shape{int64_t(ids.size()), int64_t(longest)});
  tensor count(dtype::i32, shape{int64_t(ids.size())});
  auto* w = words.data<int64_t>();
  std::fill_n(w, words.num_elements(), lm_eos);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::copy(ids[i].begin(), ids[i].end(), w + i * longest);
    count.data<int32_t>()[i] = int32_t(ids[i].size());
  }
  return {words, count};
}

namespace {

const char* sample_text = "call me ishmael|it was a dark and stormy night|the game is afoot";

std::vector<tensor> score(session& s, const std::pair<tensor, tensor>& in) {
  return s
      .run(named_feed_list{{"words", in.first}, {"word_count", in.second}},
           {"sentence_log_prob", "sentence_perplexity"})
      .value();
}

} // namespace

std::string export_lm(session& s, graph& g, const lm_serving_tower& serve, const std::string& dir,
                      const std::string& vocab_file) {
  graph frozen;
  freeze_stats st;
  throw_if_error(
      freeze_graph(s, g, {serve.log_prob.node().name, serve.perplexity.node().name}, frozen, &st));
  std::filesystem::create_directories(dir);
  auto path = dir + "/lm.pb";
  throw_if_error(save_tf_graph(frozen, path));
  std::filesystem::copy_file(vocab_file, dir + "/lm.vocab",
                             std::filesystem::copy_options::overwrite_existing);
  // The file must score as the training process does.
  auto vocab = read_vocabulary_file(vocab_file).value();
  auto in = lm_encode_sentences(sample_text, vocab);
  auto here =
      s.run({{serve.words, in.first}, {serve.word_count, in.second}}, {serve.log_prob}).value()[0];
  auto loaded = import_tf_graph(path).value();
  runtime rt;
  session served(rt, loaded);
  auto there = score(served, in)[0];
  for (int64_t i = 0; i < here.num_elements(); ++i) {
    float a = here.data<float>()[i], b = there.data<float>()[i];
    if (!(std::fabs(a - b) <= 1e-4f * std::max(1.0f, std::fabs(a))))
      throw error(internal_error("exported " + path + " scores sentence " + std::to_string(i) +
                                 " " + std::to_string(b) + ", the training session " +
                                 std::to_string(a)));
  }
  std::fprintf(stderr,
               "exported %s: %d nodes, %d variables frozen (%.1f MB); it scores '%s' as the "
               "training session does (log-probabilities %s)\n",
               path.c_str(), st.nodes, st.variables, double(st.constant_bytes) / 1e6, sample_text,
               here.values_to_string(3).c_str());
  return path;
}

int score_main(const flags& f) {
  auto model = f.get("model", f.get("checkpoint-dir", "runnel-lm") + "/lm.pb");
  auto vocab_path = model.substr(0, model.size() - (model.ends_with(".pb") ? 3 : 0)) + ".vocab";
  auto vocab = read_vocabulary_file(vocab_path).value();
  auto g = import_tf_graph(model).value();
  runtime rt;
  session s(rt, g);
  auto text = f.get("score", "");
  auto in = lm_encode_sentences(text, vocab);
  auto r = score(s, in);
  size_t i = 0;
  for (size_t b = 0, e; b <= text.size(); b = e + 1, ++i) {
    e = std::min(text.find('|', b), text.size());
    std::printf("%.4f\t%.2f\t%s\n", r[0].data<float>()[i], r[1].data<float>()[i],
                text.substr(b, e - b).c_str());
  }
  return 0;
}

} // namespace runnel::apps
