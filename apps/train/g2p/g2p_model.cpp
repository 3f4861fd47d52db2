#include "runnel/apps/train/g2p/g2p_model.hpp"

#include "runnel/apps/train/g2p/g2p_data.hpp"

#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/layers/nn_layers.hpp"
#include "runnel/ops/layers/tensor_array.hpp"

namespace runnel::apps {

namespace {

/// A decoding loop's condition: steps left, and a word not yet at <eos> (v[0]: the step, v[2]:
/// which words or hypotheses are done).
output decoding(const std::vector<output>& v, output max_steps) {
  return logical_and(less(v[0], max_steps), logical_not(reduce_all(v[2])));
}

} // namespace

g2p_model::g2p_model(graph& g, g2p_options o) : g_(&g), o_(o) {
  if (o.letters < 2 || o.phones < 3 || o.embed < 1 || o.units < 1)
    throw error(invalid_argument("g2p_model: letters, phones, embed and units must be given"));
  auto scope = g.name_scope("g2p");
  letter_embedding = glorot_variable(g, {o.letters, o.embed}, dtype::f32, o.seed, "letters");
  phone_embedding = glorot_variable(g, {o.phones, o.embed}, dtype::f32, o.seed + 1, "phones");
  fw_ = std::make_unique<lstm_cell>(
      g, o.embed, o.units,
      rnn_cell_options{.name = "encoder_fw", .seed = o.seed + 2, .fused = true});
  bw_ = std::make_unique<lstm_cell>(
      g, o.embed, o.units,
      rnn_cell_options{.name = "encoder_bw", .seed = o.seed + 3, .fused = true});
  decoder_ = std::make_unique<lstm_cell>(
      g, o.embed + 2 * o.units, 2 * o.units,
      rnn_cell_options{.name = "decoder", .seed = o.seed + 4, .fused = true});
  output_w = glorot_variable(g, {2 * o.units, o.phones}, dtype::f32, o.seed + 5, "output_w");
  output_b = variable(g, zeros(g, dtype::f32, {o.phones}), "output_b");
}

g2p_encoded g2p_model::encode(output letters, output lengths) {
  graph& g = *g_;
  auto scope = g.name_scope("encoder");
  auto x = embedding_lookup(letter_embedding.value, transpose(letters, {1, 0})); // [S, B, E]
  auto batch = strided_slice(shape_of(letters), {0}, {1}, {1}, 0, 0, 0, 0, 1);
  auto r = bidirectional_dynamic_rnn(*fw_, *bw_, x, fw_->zero_state(batch), bw_->zero_state(batch),
                                     lengths, {.name = "birnn"});
  g2p_encoded e;
  e.memory = transpose(concat({r.forward_outputs, r.backward_outputs}, 2), {1, 0, 2});
  e.lengths = lengths;
  for (size_t k = 0; k < 2; ++k)
    e.state.push_back(concat({r.forward_state[k], r.backward_state[k]}, 1));
  return e;
}

attention_mechanism& g2p_model::mechanism_for(const g2p_encoded& e) {
  if (mechanisms_.empty())
    mechanisms_.push_back(
        std::make_unique<attention_mechanism>(e.memory, e.lengths, 2 * o_.units,
                                              attention_options{.kind = o_.attention,
                                                                .memory_depth = 2 * o_.units,
                                                                .name = "attention",
                                                                .seed = o_.seed + 6}));
  else
    mechanisms_.push_back(
        std::make_unique<attention_mechanism>(*mechanisms_.front(), e.memory, e.lengths));
  return *mechanisms_.back();
}

attention_wrapper& g2p_model::wrapper_for(attention_mechanism& m) {
  if (wrappers_.empty())
    wrappers_.push_back(std::make_unique<attention_wrapper>(
        *decoder_, m, 2 * o_.units,
        rnn_cell_options{.name = "attention_wrapper", .seed = o_.seed + 7}));
  else
    wrappers_.push_back(std::make_unique<attention_wrapper>(*wrappers_.front(), m));
  return *wrappers_.back();
}

output g2p_model::logits(output attentional) const {
  return matmul(attentional, output_w.value) + output_b.value;
}

g2p_model::loss_terms g2p_model::train(const g2p_encoded& e, output dec_in, output dec_out,
                                       output dec_lengths) {
  graph& g = *g_;
  auto& cell = wrapper_for(mechanism_for(e));
  auto scope = g.name_scope("decoder");
  auto x = embedding_lookup(phone_embedding.value, transpose(dec_in, {1, 0})); // [T, B, E]
  auto batch = strided_slice(shape_of(dec_in), {0}, {1}, {1}, 0, 0, 0, 0, 1);
  auto att0 = cell.zero_state(batch).back();
  auto r = dynamic_rnn(cell, x, {e.state[0], e.state[1], att0}, dec_lengths, {.name = "teacher"});
  auto flat = reshape(r.outputs, std::vector<int64_t>{-1, 2 * o_.units});
  auto labels = reshape(transpose(dec_out, {1, 0}), std::vector<int64_t>{-1});
  auto time = strided_slice(shape_of(dec_in), {1}, {2}, {1}, 0, 0, 0, 0, 1);
  auto mask =
      reshape(transpose(sequence_mask(dec_lengths, time), {1, 0}), std::vector<int64_t>{-1});
  auto xent = sparse_softmax_cross_entropy_with_logits(logits(flat), labels).first;
  loss_terms t;
  t.nll_sum = sum(xent * mask);
  t.count = sum(mask);
  t.loss = t.nll_sum / maximum(t.count, constant(g, 1.0f));
  return t;
}

g2p_decoded g2p_model::greedy(const g2p_encoded& e, output max_steps) {
  graph& g = *g_;
  auto& cell = wrapper_for(mechanism_for(e));
  auto scope = g.name_scope("greedy");
  auto batch = strided_slice(shape_of(e.lengths), {0}, {1}, {1}, 0, 0, 0, 0, 1);
  auto go = cast(fill(expand_dims(batch, 0), constant(g, int32_t(g2p_go))), dtype::i64);
  auto done = fill(expand_dims(batch, 0), constant(g, false));
  tensor_array phones(g, dtype::i64, constant(g, int32_t(0)),
                      {.dynamic_size = true, .element_shape = shape{-1}, .name = "phones"});
  tensor_array aligned(
      g, dtype::f32, constant(g, int32_t(0)),
      {.dynamic_size = true, .element_shape = shape{-1, -1}, .name = "alignments"});
  auto att0 = cell.zero_state(batch).back();
  std::vector<output> vars{constant(g, int32_t(0)), go,         done,       phones.flow(),
                           aligned.flow(),          e.state[0], e.state[1], att0};
  auto r = while_loop([&](const std::vector<output>& v) { return decoding(v, max_steps); },
                      [&](const std::vector<output>& v) {
                        auto x = embedding_lookup(phone_embedding.value, v[1]);
                        auto [a, next] = cell.step(x, {v[5], v[6], v[7]});
                        auto best = argmax(logits(a), 1);
                        best = best * cast(logical_not(v[2]), dtype::i64); // <eos> (0) once done
                        auto now_done =
                            logical_or(v[2], equal(best, constant(g, int64_t(g2p_eos))));
                        return std::vector<output>{
                            v[0] + constant(g, int32_t(1)),
                            best,
                            now_done,
                            phones.with_flow(v[3]).write(v[0], best).flow(),
                            aligned.with_flow(v[4]).write(v[0], cell.last_alignments()).flow(),
                            next[0],
                            next[1],
                            next[2]};
                      },
                      vars, {.parallel_iterations = 1, .name = "decode"});
  g2p_decoded d;
  d.phones = transpose(phones.with_flow(r[3]).stack(), {1, 0});
  d.alignments = aligned.with_flow(r[4]).stack();
  return d;
}

g2p_decoded g2p_model::beam_search(const g2p_encoded& e, int64_t width, output max_steps) {
  graph& g = *g_;
  if (width < 1)
    throw error(invalid_argument("beam_search: the width must be positive"));
  auto scope = g.name_scope("beam_search");
  auto batch = strided_slice(shape_of(e.lengths), {0}, {1}, {1}, 0, 0, 0, 0, 1);
  auto k = constant(g, int32_t(width));
  // Row b * width + j is hypothesis j of word b: the encoder's results repeated per hypothesis.
  auto rows = reshape(
      tile(expand_dims(range(g, constant(g, int32_t(0)), batch, constant(g, int32_t(1))), 1),
           {1, width}),
      std::vector<int64_t>{-1});
  g2p_encoded tiled{gather(e.memory, rows),
                    gather(e.lengths, rows),
                    {gather(e.state[0], rows), gather(e.state[1], rows)}};
  auto& cell = wrapper_for(mechanism_for(tiled));
  auto beams = batch * k;
  auto go = cast(fill(expand_dims(beams, 0), constant(g, int32_t(g2p_go))), dtype::i64);
  auto done = fill(expand_dims(beams, 0), constant(g, false));
  // Only the first hypothesis of each word is live at the start.
  tensor first(dtype::f32, shape{width});
  for (int64_t j = 0; j < width; ++j)
    first.data<float>()[j] = j == 0 ? 0.0f : -1e9f;
  auto scores = reshape(fill(stack({batch, constant(g, int32_t(1))}), constant(g, 0.0f)) +
                            reshape(constant(g, first), std::vector<int64_t>{1, width}),
                        std::vector<int64_t>{-1});
  auto seqs = fill(stack({beams, constant(g, int32_t(0))}), constant(g, int64_t(0)));
  auto att0 = cell.zero_state(beams).back();
  // A finished hypothesis may only go on with <eos>, at no cost.
  tensor eos_row(dtype::f32, shape{1, o_.phones});
  for (int64_t p = 0; p < o_.phones; ++p)
    eos_row.data<float>()[p] = p == g2p_eos ? 0.0f : -1e9f;
  auto eos_only = constant(g, eos_row);
  int64_t phones = o_.phones;
  std::vector<output> vars{constant(g, int32_t(0)), go,  done, scores, seqs, tiled.state[0],
                           tiled.state[1],          att0};
  auto r = while_loop(
      [&](const std::vector<output>& v) { return decoding(v, max_steps); },
      [&](const std::vector<output>& v) {
        auto x = embedding_lookup(phone_embedding.value, v[1]);
        auto [a, next] = cell.step(x, {v[5], v[6], v[7]});
        auto finished = expand_dims(cast(v[2], dtype::f32), 1);
        auto logp = log_softmax(logits(a)) * (1.0 - finished) + eos_only * finished;
        auto total =
            reshape(expand_dims(v[3], 1) + logp, stack({batch, k * constant(g, int32_t(phones))}));
        auto [best, index] = top_k(total, k); // [batch, width]
        auto p = constant(g, int32_t(phones));
        auto parent_beam = floor_div(index, p), phone = floor_mod(index, p);
        auto base =
            expand_dims(range(g, constant(g, int32_t(0)), batch, constant(g, int32_t(1))), 1) * k;
        auto parent = reshape(base + parent_beam, std::vector<int64_t>{-1});
        auto token = cast(reshape(phone, std::vector<int64_t>{-1}), dtype::i64);
        auto was_done = gather(v[2], parent);
        auto seq = concat({gather(v[4], parent), expand_dims(token, 1)}, 1);
        return std::vector<output>{
            v[0] + constant(g, int32_t(1)),
            token,
            logical_or(was_done, equal(token, constant(g, int64_t(g2p_eos)))),
            reshape(best, std::vector<int64_t>{-1}),
            seq,
            gather(next[0], parent),
            gather(next[1], parent),
            gather(next[2], parent)};
      },
      vars,
      {.parallel_iterations = 1,
       .shape_invariants = {shape{}, shape{-1}, shape{-1}, shape{-1}, shape{-1, -1},
                            shape{-1, 2 * o_.units}, shape{-1, 2 * o_.units},
                            shape{-1, 2 * o_.units}},
       .name = "search"});
  // top_k keeps each word's hypotheses sorted: the first is the best.
  auto firsts = range(g, constant(g, int32_t(0)), beams, k);
  g2p_decoded d;
  d.phones = gather(r[4], firsts);
  d.score = gather(r[3], firsts);
  return d;
}

} // namespace runnel::apps
