#include "runnel/ops/layers/sampled_losses.hpp"

#include <cfloat>

namespace runnel {
namespace {

sampled_candidates sampler(const char* op, output true_classes, int64_t num_sampled,
                           int64_t range_max, const sampler_options& o, attr_map extra = {}) {
  graph& g = true_classes.owner();
  auto scope = g.name_scope(o.name.empty() ? op : o.name);
  auto truth = true_classes.type() == dtype::i64 ? true_classes : cast(true_classes, dtype::i64);
  auto [s1, s2] = seeds(g, o.seed);
  attr_map attrs{{"num_true", o.num_true}, {"num_sampled", num_sampled},
                 {"unique", o.unique},     {"range_max", range_max},
                 {"seed", s1},             {"seed2", s2}};
  for (auto& [k, v] : extra)
    attrs[k] = v;
  auto outs = g.build(op, op, {truth.ep()}, attrs);
  return {outs[0], outs[1], outs[2]};
}

/// TensorFlow's _compute_sampled_logits: logits [batch, num_true + num_sampled] and labels.
std::pair<output, output> sampled_logits(const std::vector<output>& weights,
                                         const std::vector<output>& biases, output labels,
                                         output inputs, const sampled_loss_options& o,
                                         bool remove_hits, const char* what) {
  graph& g = inputs.owner();
  auto fail = [&](const std::string& msg) {
    return error(invalid_argument(std::string(what) + ": " + msg));
  };
  if (o.num_sampled < 1 || o.num_classes < 1 || o.num_true < 1)
    throw fail("num_sampled, num_classes and num_true must be positive, got " +
               std::to_string(o.num_sampled) + ", " + std::to_string(o.num_classes) + " and " +
               std::to_string(o.num_true));
  if (weights.empty() || biases.empty())
    throw fail("no weights or biases");
  if (labels.type() != dtype::i32 && labels.type() != dtype::i64)
    throw fail("labels '" + labels.name() + "' must be integer, got " +
               std::string(name(labels.type())));
  const shape& xs = inputs.shape();
  if (!xs.has_known_rank() || xs.rank() != 2 || xs[1] < 0)
    throw fail("inputs '" + inputs.name() + "' must be [batch, dim] with a known dim, got " +
               xs.to_string());
  int64_t dim = xs[1], t = o.num_true;
  dtype ft = inputs.type();
  auto labels64 = labels.type() == dtype::i64 ? labels : cast(labels, dtype::i64);
  labels64 = reshape(labels64, std::vector<int64_t>{-1, t}, "labels");
  auto sv = o.sampled_values ? *o.sampled_values
                             : log_uniform_candidate_sampler(labels64, o.num_sampled,
                                                             o.num_classes,
                                                             {.num_true = t, .seed = o.seed});
  auto sampled = stop_gradient(sv.sampled, "sampled");
  auto flat = reshape(labels64, std::vector<int64_t>{-1}, "flat_labels");
  embedding_options lookup{.strategy = o.strategy, .name = "true_w"};
  // The true classes' rows and the sampled ones', each through a lookup: both gradients are
  // indexed slices of the weights.
  auto true_w = reshape(embedding_lookup(weights, flat, lookup), std::vector<int64_t>{-1, t, dim});
  lookup.name = "true_b";
  auto true_b = reshape(embedding_lookup(biases, flat, lookup), std::vector<int64_t>{-1, t});
  lookup.name = "sampled_w";
  auto sampled_w = embedding_lookup(weights, sampled, lookup);
  lookup.name = "sampled_b";
  auto sampled_b = embedding_lookup(biases, sampled, lookup);
  auto true_logits = sum(expand_dims(inputs, 1) * true_w, {2}) + true_b;
  auto logits = matmul(inputs, sampled_w, {.transpose_b = true}) + sampled_b;
  if (remove_hits) {
    // A sampled class that is one of the example's true classes gets -FLT_MAX: it must not count
    // against the example.
    auto hits = reduce_any(equal(expand_dims(labels64, 2),
                                 reshape(sampled, std::vector<int64_t>{1, 1, o.num_sampled})),
                           {1}, false, "accidental_hits");
    logits = logits + cast(hits, ft) * filled(g, ft, shape{}, -FLT_MAX, "minus_max");
  }
  auto as_ft = [&](output x) { return x.type() == ft ? x : cast(x, ft); };
  true_logits = true_logits - log(as_ft(stop_gradient(sv.true_expected_count)));
  logits = logits - log(as_ft(stop_gradient(sv.sampled_expected_count)));
  auto out_logits = concat({true_logits, logits}, 1, "logits");
  auto out_labels = concat({ones_like(true_logits) / double(t), zeros_like(logits)}, 1, "labels");
  return {out_logits, out_labels};
}

} // namespace

sampled_candidates log_uniform_candidate_sampler(output true_classes, int64_t num_sampled,
                                                 int64_t range_max, sampler_options o) {
  return sampler("LogUniformCandidateSampler", true_classes, num_sampled, range_max, o);
}

sampled_candidates uniform_candidate_sampler(output true_classes, int64_t num_sampled,
                                             int64_t range_max, sampler_options o) {
  return sampler("UniformCandidateSampler", true_classes, num_sampled, range_max, o);
}

sampled_candidates fixed_unigram_candidate_sampler(output true_classes, int64_t num_sampled,
                                                   const std::vector<double>& counts,
                                                   double distortion, int64_t num_reserved_ids,
                                                   sampler_options o) {
  return sampler("FixedUnigramCandidateSampler", true_classes, num_sampled,
                 num_reserved_ids + int64_t(counts.size()), o,
                 {{"unigrams", counts},
                  {"distortion", distortion},
                  {"num_reserved_ids", num_reserved_ids}});
}

output neg_train(const graph_variable& w_in, const graph_variable& w_out, output examples,
                 output labels, output lr, const std::vector<int64_t>& vocab_count,
                 int64_t num_negative, int64_t num_threads, std::string_view name) {
  graph& g = w_in.ref.owner();
  auto col = g.colocate_with(w_in.ref);
  return g.build("NegTrain", name.empty() ? "NegTrain" : name,
                 {w_in.ref.ep(), w_out.ref.ep(), examples.ep(), labels.ep(), lr.ep()},
                 {{"vocab_count", vocab_count},
                  {"num_negative_samples", num_negative},
                  {"num_threads", num_threads}})[0];
}

output sigmoid_cross_entropy_with_logits(output logits, output labels, std::string_view name) {
  auto scope = logits.owner().name_scope(name.empty() ? "logistic_loss" : name);
  return relu(logits) - logits * labels + log1p(exp(-abs(logits)));
}

output nce_loss(const std::vector<output>& weights, const std::vector<output>& biases,
                output labels, output inputs, sampled_loss_options o) {
  auto scope = inputs.owner().name_scope(o.name.empty() ? "nce_loss" : o.name);
  auto [logits, targets] = sampled_logits(weights, biases, labels, inputs, o,
                                          o.remove_accidental_hits.value_or(false), "nce_loss");
  return sum(sigmoid_cross_entropy_with_logits(logits, targets), {1}, false, "loss");
}

output nce_loss(output weights, output biases, output labels, output inputs,
                sampled_loss_options o) {
  return nce_loss(std::vector<output>{weights}, std::vector<output>{biases}, labels, inputs, o);
}

output sampled_softmax_loss(const std::vector<output>& weights, const std::vector<output>& biases,
                            output labels, output inputs, sampled_loss_options o) {
  auto scope = inputs.owner().name_scope(o.name.empty() ? "sampled_softmax_loss" : o.name);
  auto [logits, targets] =
      sampled_logits(weights, biases, labels, inputs, o, o.remove_accidental_hits.value_or(true),
                     "sampled_softmax_loss");
  return softmax_cross_entropy_with_logits(logits, stop_gradient(targets)).first;
}

output sampled_softmax_loss(output weights, output biases, output labels, output inputs,
                            sampled_loss_options o) {
  return sampled_softmax_loss(std::vector<output>{weights}, std::vector<output>{biases}, labels,
                              inputs, o);
}

} // namespace runnel
