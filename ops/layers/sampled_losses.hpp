#pragma once
// Candidate samplers and the sampled losses of word2vec and large-vocabulary softmax models, as
// TensorFlow's tf.nn.*_candidate_sampler, tf.nn.nce_loss and tf.nn.sampled_softmax_loss:
//
//   auto w = variable(g, truncated_normal(g, {vocab, dim}, 0.1), "nce_w");
//   auto b = variable(g, zeros(g, dtype::f32, {vocab}), "nce_b");
//   auto loss = mean(nce_loss(w, b, labels, embedded, {.num_sampled = 64, .num_classes = vocab}));
//
// Each step draws `num_sampled` classes (log-uniform by default: class ids sorted by falling
// frequency), scores the true and sampled classes only, and corrects each logit by the log of its
// class's expected count in the draw. The weights and biases are read through embedding lookups,
// so their gradients are indexed slices (only the rows scored are updated).

#include <optional>
#include <vector>

#include "runnel/ops/layers/embedding.hpp"

namespace runnel {

/// A draw of candidates: sampled [num_sampled] i64, and the expected count of each true class
/// ([batch, num_true] f32) and of each sampled one ([num_sampled] f32).
struct sampled_candidates {
  output sampled, true_expected_count, sampled_expected_count;
};

struct sampler_options {
  int64_t num_true = 1;
  /// Draw until num_sampled distinct classes came up (the expected counts account for it).
  bool unique = true;
  int64_t seed = 0;
  std::string_view name = {};
};
/// P(k) = log((k + 2) / (k + 1)) / log(range_max + 1): Zipf-like, for ids sorted by frequency.
sampled_candidates log_uniform_candidate_sampler(output true_classes, int64_t num_sampled,
                                                 int64_t range_max, sampler_options o = {});
sampled_candidates uniform_candidate_sampler(output true_classes, int64_t num_sampled,
                                             int64_t range_max, sampler_options o = {});
/// P(k) ∝ counts[k - reserved]^distortion (word2vec uses distortion 0.75); the first
/// `num_reserved_ids` ids are never drawn.
sampled_candidates fixed_unigram_candidate_sampler(output true_classes, int64_t num_sampled,
                                                   const std::vector<double>& counts,
                                                   double distortion = 1.0,
                                                   int64_t num_reserved_ids = 0,
                                                   sampler_options o = {});

struct sampled_loss_options {
  int64_t num_sampled = 0;
  int64_t num_classes = 0;
  int64_t num_true = 1;
  /// A draw made elsewhere (default: log-uniform, unique, over num_classes).
  std::optional<sampled_candidates> sampled_values;
  /// Drop sampled classes that equal a true class from that example's logits (default: no for
  /// nce_loss, yes for sampled_softmax_loss, as TensorFlow).
  std::optional<bool> remove_accidental_hits;
  /// How class ids map onto the parts of partitioned weights.
  partition_strategy strategy = partition_strategy::mod;
  int64_t seed = 0;
  std::string_view name = {};
};

/// Noise-contrastive estimation: per example, the sum over true and sampled classes of the
/// sigmoid cross-entropy of (w·x + b − log expected count) against 1/num_true (true) or 0
/// (sampled). `weights` [num_classes, dim] (or its parts), `biases` [num_classes], `labels`
/// [batch, num_true] integer, `inputs` [batch, dim]. Returns [batch].
output nce_loss(const std::vector<output>& weights, const std::vector<output>& biases,
                output labels, output inputs, sampled_loss_options o);
output nce_loss(output weights, output biases, output labels, output inputs,
                sampled_loss_options o);
/// Sampled softmax: the softmax cross-entropy over the true and sampled classes' corrected
/// logits. Returns [batch].
output sampled_softmax_loss(const std::vector<output>& weights, const std::vector<output>& biases,
                            output labels, output inputs, sampled_loss_options o);
output sampled_softmax_loss(output weights, output biases, output labels, output inputs,
                            sampled_loss_options o);

/// TensorFlow's fused skip-gram update with negative sampling (NegTrain): for each
/// (examples[i], labels[i]) pair one SGD step with learning rate `lr` on the rows of `w_in` and
/// `w_out`, drawing `num_negative` negatives from counts^0.75. Runs at w_in's actor. Returns the
/// pairs' mean loss before their update (measured on every 8th pair). With `num_threads` > 1 the
/// pairs are split over that many CPU threads updating the tables without locks (Hogwild: fast,
/// not bit-for-bit reproducible).
output neg_train(const graph_variable& w_in, const graph_variable& w_out, output examples,
                 output labels, output lr, const std::vector<int64_t>& vocab_count,
                 int64_t num_negative, int64_t num_threads = 1, std::string_view name = {});

/// Per element: max(x, 0) − x·z + log(1 + exp(−|x|)), the stable form of
/// −z·log σ(x) − (1 − z)·log(1 − σ(x)).
output sigmoid_cross_entropy_with_logits(output logits, output labels, std::string_view name = {});

} // namespace runnel
