#include "runnel/apps/train/lm/lm_model.hpp"

#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/layers/nn_layers.hpp"
#include "runnel/ops/layers/sampled_losses.hpp"

namespace runnel::apps {
namespace {

/// uniform(-0.1, 0.1), as the PyTorch peer initialises the same tables.
output small_uniform(graph& g, const shape& s, int64_t seed, const char* name) {
  return (random_uniform(g, s, dtype::f32, seed, name) - 0.5) * 0.2;
}

} // namespace

lm_model::lm_model(graph& g, lm_options o) : g_(&g), o_(o) {
  if (o.vocab < 3 || o.dim < 1 || o.layers < 1 || !(o.keep_prob > 0 && o.keep_prob <= 1) ||
      o.num_sampled < 1 || o.num_sampled >= o.vocab)
    throw error(invalid_argument(
        "lm_model: vocabulary above 2, a positive width and layer count, keep probability in "
        "(0, 1] and 1 <= num_sampled < vocabulary are needed"));
  auto scope = g.name_scope("lm");
  embedding =
      variable(g, small_uniform(g, {o.vocab, o.dim}, o.seed, "embedding_init"), "embedding");
  std::vector<rnn_cell*> raw;
  for (int64_t l = 0; l < o.layers; ++l) {
    cells_.push_back(std::make_unique<lstm_cell>(
        g, o.dim, o.dim,
        rnn_cell_options{
            .name = "lstm_" + std::to_string(l), .seed = o.seed + 10 + l, .fused = true}));
    raw.push_back(cells_.back().get());
  }
  stack_ = std::make_unique<multi_rnn_cell>(raw);
  softmax_w =
      variable(g, small_uniform(g, {o.vocab, o.dim}, o.seed + 1, "softmax_w_init"), "softmax_w");
  softmax_b = variable(g, zeros(g, dtype::f32, {o.vocab}), "softmax_b");
}

lm_tower lm_model::build(output lengths, output inputs, output targets, output training,
                         bool sampled) {
  graph& g = *g_;
  auto scope = g.name_scope(sampled ? "train" : "eval");
  auto time_major = transpose(inputs, {1, 0}); // [T, B]
  auto x = embedding_lookup(embedding.value, time_major);
  if (training.valid() && o_.keep_prob < 1)
    x = dropout(x, o_.keep_prob, training, o_.seed + 2);
  auto batch = strided_slice(shape_of(inputs), {0}, {1}, {1}, 0, 0, 0, 0, 1);
  auto time = strided_slice(shape_of(inputs), {1}, {2}, {1}, 0, 0, 0, 0, 1);
  auto r = dynamic_rnn(*stack_, x, stack_->zero_state(batch));
  auto h = r.outputs; // [T, B, dim]
  if (training.valid() && o_.keep_prob < 1)
    h = dropout(h, o_.keep_prob, training, o_.seed + 3);
  auto flat = reshape(h, std::vector<int64_t>{-1, o_.dim});
  auto labels = reshape(transpose(targets, {1, 0}), std::vector<int64_t>{-1});
  auto mask = reshape(transpose(sequence_mask(lengths, time), {1, 0}), std::vector<int64_t>{-1});
  lm_tower t;
  output per_token;
  if (sampled) {
    per_token = sampled_softmax_loss(
        softmax_w.value, softmax_b.value, reshape(labels, std::vector<int64_t>{-1, 1}), flat,
        {.num_sampled = o_.num_sampled, .num_classes = o_.vocab, .seed = o_.seed + 4});
  } else {
    t.logits = matmul(flat, softmax_w.value, {.transpose_b = true}) + softmax_b.value;
    per_token = sparse_softmax_cross_entropy_with_logits(t.logits, labels).first;
  }
  auto masked = per_token * mask;
  t.sentence_nll = sum(reshape(masked, shape_of(time_major)), {0});
  t.nll_sum = sum(masked);
  t.tokens = sum(mask);
  t.loss = t.nll_sum / maximum(t.tokens, constant(g, 1.0f));
  return t;
}

} // namespace runnel::apps
