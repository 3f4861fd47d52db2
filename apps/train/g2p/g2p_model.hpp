#pragma once
// The g2p app's encoder-decoder with attention: letters → embeddings → a bidirectional LSTM
// (its outputs joined: the memory); a decoder LSTM started from both directions' final states,
// attending over the memory after every step (Luong's general score or Bahdanau's additive one,
// ops/layers/attention.hpp, with input feeding), and a softmax over the phones. Training is
// teacher-forced through dynamic_rnn; greedy decoding and beam search are while_loops in the
// graph, so a frozen export decodes by itself.

#include <memory>
#include <vector>

#include "runnel/ops/layers/attention.hpp"

namespace runnel::apps {

struct g2p_options {
  int64_t letters = 0; ///< letter ids, padding included
  int64_t phones = 0;  ///< phone ids, <eos> and <go> included
  int64_t embed = 64;
  int64_t units = 128; ///< per encoder direction; the decoder has twice as many
  attention_kind attention = attention_kind::luong;
  int64_t seed = 1;
};

struct g2p_encoded {
  output memory;             ///< [batch, letters, 2 units]
  output lengths;            ///< int32 [batch]
  std::vector<output> state; ///< the decoder's first c and h, [batch, 2 units]
};

struct g2p_decoded {
  output phones;     ///< int64 [batch, steps]: ids, 0 (<eos>) once a word is done
  output alignments; ///< greedy: [steps, batch, letters]; beam search: invalid
  output score;      ///< beam search: the best beam's log-probability [batch]
};

class g2p_model {
public:
  g2p_model(graph& g, g2p_options o);
  g2p_encoded encode(output letters, output lengths);
  /// Mean cross-entropy per target phone (<eos> included) and its sum and count.
  struct loss_terms {
    output loss, nll_sum, count;
  };
  loss_terms train(const g2p_encoded& e, output dec_in, output dec_out, output dec_lengths);
  /// Up to `max_steps` (int32 scalar) phones per word, each the most likely.
  g2p_decoded greedy(const g2p_encoded& e, output max_steps);
  /// Beam search of `width` hypotheses per word; the best ends with <eos> or at `max_steps`.
  g2p_decoded beam_search(const g2p_encoded& e, int64_t width, output max_steps);

  graph_variable letter_embedding, phone_embedding, output_w, output_b;

private:
  attention_mechanism& mechanism_for(const g2p_encoded& e);
  attention_wrapper& wrapper_for(attention_mechanism& m);
  output logits(output attentional) const;

  graph* g_;
  g2p_options o_;
  std::unique_ptr<lstm_cell> fw_, bw_, decoder_;
  std::vector<std::unique_ptr<attention_mechanism>> mechanisms_;
  std::vector<std::unique_ptr<attention_wrapper>> wrappers_;
};

} // namespace runnel::apps
