#pragma once
// Serving the language model: a tower that scores whole sentences from placeholders, frozen
// with the trained weights into CHECKPOINT-DIR/lm.pb (a TensorFlow GraphDef) with the vocabulary
// beside it (lm.vocab), and `lm --score` reading them back.
//
// The exported graph's interface (for `runnel run`, the C++ API or TensorFlow):
//   words       int64 [batch, n]  word ids, each row padded with 0 past its words
//   word_count  int32 [batch]     words in each row
//   sentence_log_prob   float32 [batch]  natural log-probability of the words and <eos>
//   sentence_perplexity float32 [batch]  exp(-log_prob / (word_count + 1))

#include <string>
#include <vector>

#include "runnel/actors/exec/session.hpp"
#include "runnel/apps/support/app_support.hpp"
#include "runnel/apps/train/lm/lm_model.hpp"

namespace runnel::apps {

struct lm_serving_tower {
  explicit lm_serving_tower(lm_model& m);
  output words, word_count, log_prob, perplexity;
};

/// Sentences ('|'-separated) tokenized into a words/word_count pair (unknown words: <unk>).
std::pair<tensor, tensor> lm_encode_sentences(const std::string& text,
                                              const std::vector<std::string>& vocab);

/// Freezes the serving tower into `dir`/lm.pb, copies the vocabulary to `dir`/lm.vocab, loads
/// the file back and checks it scores a sentence as the training session does (an error
/// otherwise). Returns the .pb's path.
std::string export_lm(session& s, graph& g, const lm_serving_tower& serve, const std::string& dir,
                      const std::string& vocab_file);

/// `lm --score TEXT [--model F.pb]`.
int score_main(const flags& f);

} // namespace runnel::apps
