#pragma once
// The word-level LSTM language model of the lm app and the lm_bucketing benchmark: embeddings,
// stacked fused LSTMs over time-major batches, dropout on the LSTMs' inputs and outputs, and a
// softmax layer: sampled softmax in training, the full softmax in evaluation.
//
//   lm_model m(g, {.vocab = 10000, .dim = 200});
//   auto train = m.build(lengths, inputs, targets, training, /*sampled=*/true);
//   auto eval = m.build(lengths2, inputs2, targets2, {}, /*sampled=*/false);
//   // eval.nll_sum / eval.tokens over a split, exponentiated: the perplexity
//
// Batches are [batch, time] int64 ids, padded past each sentence's length; padding positions
// are masked out of every loss. The LSTM runs over the padded time steps (the padding is
// computed, which is what bucketing saves) but its outputs at a step depend only on earlier
// steps, so padding never changes a real position's result.

#include <memory>
#include <vector>

#include "runnel/ops/layers/rnn.hpp"

namespace runnel::apps {

struct lm_options {
  int64_t vocab = 10000;
  int64_t dim = 200; ///< embedding and LSTM width
  int64_t layers = 1;
  double keep_prob = 0.5;
  int64_t num_sampled = 512;
  int64_t seed = 1;
};

struct lm_tower {
  output loss;         ///< mean loss per real token (sampled or full softmax)
  output nll_sum;      ///< summed over real tokens (float32)
  output tokens;       ///< real tokens (float32)
  output sentence_nll; ///< [batch]: each sentence's negative log-likelihood (nats)
  output logits;       ///< [time * batch, vocab] (full softmax only)
};

class lm_model {
public:
  lm_model(graph& g, lm_options o);
  /// `lengths` int32 [B], `inputs`/`targets` int64 [B, T]; `training` a bool scalar switching
  /// dropout (invalid: no dropout).
  lm_tower build(output lengths, output inputs, output targets, output training, bool sampled);
  const lm_options& options() const { return o_; }

  graph_variable embedding, softmax_w, softmax_b;

private:
  graph* g_;
  lm_options o_;
  std::vector<std::unique_ptr<lstm_cell>> cells_;
  std::unique_ptr<multi_rnn_cell> stack_;
};

} // namespace runnel::apps
